# The two things to run on a fresh machine (each installs what it needs first):
#   make demo   boot the lab VM: calibrate a table within a budget, asa run on it, asa pin gru
#   make test   every check: format, clippy, unit tests, and the VM acceptance tests
CARGO ?= cargo

.PHONY: demo test setup kernel bench-switch scenarios-full live-eval per-app-eval install uninstall deb

setup:
	lab/setup.sh

kernel: setup
	$(CARGO) run --quiet -p asa-lab -- kernel

demo: setup
	$(CARGO) build --release -p asa-agent -p asa-lab -p asa-gru-expert
	target/release/asa-lab demo

# A fresh clone builds once: incremental caches would only take disk.
test: export CARGO_INCREMENTAL = 0
test: kernel
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace -- --include-ignored
	cd classifier && .venv/bin/python -m pytest -q
	cd lab/analysis && ../../classifier/.venv/bin/python -m pytest -q tests
	classifier/.venv/bin/python -m pytest -q gru_expert/train/tests

# Install on a machine with sched_ext: `cargo build --release -p asa-agent`, then
# `sudo make install` (PREFIX=/usr/local, DESTDIR= for a staging root; SYSCONFDIR, UNITDIR,
# DBUSDIR, POLKITDIR, ASA_BIN and STRIP=0 as packaging/install.sh describes). The files are
# those of packaging/files.txt, the list the Debian package (`make deb`) is built from too.
PREFIX ?= /usr/local
INSTALL_ENV = PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) \
	$(if $(SYSCONFDIR),SYSCONFDIR=$(SYSCONFDIR)) $(if $(UNITDIR),UNITDIR=$(UNITDIR)) \
	$(if $(DBUSDIR),DBUSDIR=$(DBUSDIR)) $(if $(POLKITDIR),POLKITDIR=$(POLKITDIR)) \
	$(if $(ASA_BIN),ASA_BIN=$(ASA_BIN)) $(if $(STRIP),STRIP=$(STRIP))
install:
	$(INSTALL_ENV) packaging/install.sh install

uninstall:
	$(INSTALL_ENV) packaging/install.sh uninstall

# The Debian package, target/debian/asa_<version>_<arch>.deb: `sudo apt install ./target/debian/asa_*.deb`.
deb:
	$(CARGO) build --release -p asa-agent
	packaging/build-deb.sh

# Long run, not in CI: switch time of every ordered pair of experts (README table), with the
# attach gate, break before make, and to hot standbys parked beforehand, into
# results/<date>-switch-times/ (commit it with a README: question, machine, answer).
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

# Long run, not in CI: every scenario x every sched_ext expert and EEVDF in one lab VM, with feature
# recording for the workload classifier (see scenarios/README.md for time and settings).
SCENARIOS_OUT ?= results/$(shell date -u +%F)-scenarios-every-expert
scenarios-full: setup
	$(CARGO) build --release -p asa-agent -p asa-lab -p asa-scenarios
	scenarios/lab/full-run.sh $(SCENARIOS_OUT)

# Long run, not in CI: the live evaluation of `asa run` against the static experts the table
# chooses among (LIVE_EVAL_EXPERTS) and its own dry run, on the calibration's 8 scenarios
# (4 phased), 2 repetitions in rotated order, 60 s runs with phases of at least 30 s, release
# binaries, the agent warm before each run's load starts; about 150 minutes
# (LIVE_EVAL_DRY_RUN=0: without the dry run, about 120). Writes results/<date>-agent-live-eval/
# (live.md: verdicts beyond the measured noise).
LIVE_EVAL_OUT ?= results/$(shell date -u +%F)-agent-live-eval
LIVE_EVAL_TABLE ?= results/2026-11-28-stay-on-the-default-expert/mapping-7-experts-stay-default.toml
LIVE_EVAL_EXPERTS ?= eevdf,bpfland,flash,cosmos
LIVE_EVAL_DRY_RUN ?= 1
live-eval: setup
	$(CARGO) build --release -p asa-agent -p asa-lab -p asa-scenarios
	EXPERTS=$(LIVE_EVAL_EXPERTS) DURATION=60 MIN_PHASE=30 REPS=2 TIMEOUT=10800 DRY_RUN=$(LIVE_EVAL_DRY_RUN) \
	  mapping/lab/live-run.sh $(LIVE_EVAL_OUT) $(LIVE_EVAL_TABLE) classifier/models/lab/classifier.onnx

# Long run, not in CI: issue 40's per-application evaluation, every scenario (28 single-phase,
# 4 phased) under cosmos and under `asa run` in per-application mode, 2 rounds of 8 parts, one
# lab-VM boot per part (MTTCG; about half an hour each), resumable: rerun with the same
# PER_APP_OUT (PARTS=1,2 runs only those parts, ROUNDS=1 only the first round). Writes
# $(PER_APP_OUT)/summary.json once every part is in (mapping/lab/per-app-eval.sh). The table:
# the lab VM's calibrated class rows (per-application mode or cosmos, per load).
PER_APP_OUT ?= results/$(shell date -u +%F)-per-app-eval
PER_APP_TABLE ?= results/2026-11-30-class-rows-60s-mttcg/mapping-load.toml
per-app-eval: setup
	$(CARGO) build --release -p asa-agent -p asa-lab -p asa-scenarios
	ASA_LAB_TCG_THREAD=multi mapping/lab/per-app-eval.sh $(PER_APP_OUT) $(PER_APP_TABLE)
