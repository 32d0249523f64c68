# The two things to run on a fresh machine (each installs what it needs first):
#   make demo   boot the lab VM and show ASA pinning an expert under a workload
#   make test   every check: format, clippy, unit tests, and the VM acceptance tests
CARGO ?= cargo

.PHONY: demo test setup kernel bench-switch scenarios-full

setup:
	lab/setup.sh

kernel: setup
	$(CARGO) run --quiet -p asa-lab -- kernel

demo: setup
	$(CARGO) build --release -p asa-agent -p asa-lab
	target/release/asa-lab demo

test: kernel
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace -- --include-ignored
	cd classifier && .venv/bin/python -m pytest -q
	classifier/.venv/bin/python -m pytest -q gru_expert/train/tests

# Long run, not in CI: switch time of every ordered pair of experts (README table), with the
# attach gate, break before make, and to hot standbys parked beforehand.
SWITCH_OUT ?= results/$(shell date -u +%F)-switch-times
bench-switch: setup
	$(CARGO) build --release -p asa-agent -p asa-lab
	mkdir -p $(SWITCH_OUT)
	target/release/asa-lab bench-switch --rounds 3 --json $(SWITCH_OUT)/switch-times.json \
	  | tee $(SWITCH_OUT)/switch-times.md
	target/release/asa-lab bench-switch --rounds 3 --break-before-make \
	  --json $(SWITCH_OUT)/switch-times-break-before-make.json \
	  | tee $(SWITCH_OUT)/switch-times-break-before-make.md
	target/release/asa-lab bench-switch --rounds 3 --standby-targets \
	  --json $(SWITCH_OUT)/switch-times-standby.json \
	  | tee $(SWITCH_OUT)/switch-times-standby.md

# Long run, not in CI: every scenario x eevdf,lavd,bpfland,rusty in one lab VM, with feature
# recording for the workload classifier (see scenarios/README.md for time and settings).
SCENARIOS_OUT ?= scenarios/results/$(shell date -u +%F)-lab-vm
scenarios-full: setup
	$(CARGO) build --release -p asa-agent -p asa-lab -p asa-scenarios
	scenarios/lab/full-run.sh $(SCENARIOS_OUT)
