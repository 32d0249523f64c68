//! The Debian package on a machine with sched_ext, as an administrator meets it (issue 41): the
//! package (`packaging/build-deb.sh`, from this build's `asa`) installed with `dpkg -i` in the
//! lab VM (Debian's sched_ext kernel, the test root filesystem, no network, no systemd):
//! - `dpkg -i` installs it (its `Depends:` are met by a minimal Debian) and `asa` is on PATH;
//! - out of the box, `asa doctor` passes on the installed config, model, ONNX Runtime (shipped in
//!   /usr/lib/asa, its licence in /usr/share/doc/asa) and built-in table;
//! - `asa calibrate --budget` measures this machine (two short scenarios of the load the default
//!   model knows, two experts) within its budget and writes a table whose rows say their margin
//!   and whether they are settled; the administrator names it in `/etc/asa/asa.toml`;
//! - the unit's `ExecStart=` line runs the agent on that table: its socket answers, it decides,
//!   and SIGTERM leaves EEVDF;
//! - with the shipped ONNX Runtime gone, `asa doctor` fails with one line that says what to do
//!   and `asa run` refuses to start, the kernel untouched; a library named by `onnxruntime` in
//!   the installed `/etc/asa/asa.toml` serves instead;
//! - `dpkg -r` removes the program and keeps the edited config; `dpkg -P` removes that too.
//!
//! The unit's sandbox and the D-Bus face are vm_hardening's and vm_dbus's; this test is the
//! package's.

use std::path::PathBuf;
use std::process::Command;

use asa_lab::Lab;
use serde_json::Value;

/// The package, built from this build's `asa` into `dir`.
fn build_package(dir: &std::path::Path) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packaging/build-deb.sh");
    let out = Command::new(script)
        .args(["--binary", env!("CARGO_BIN_EXE_asa")])
        .arg("--out")
        .arg(dir)
        .args(["--compression", "none"])
        .output()
        .expect("packaging/build-deb.sh runs (lab/setup.sh installs dpkg-dev)");
    assert!(
        out.status.success(),
        "build-deb.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

const SCRIPT: &str = r#"
set -u
rec() { echo "$1=$2" >> /lab/out/results; }
state() { cat /sys/kernel/sched_ext/state; }
# The lab's own asa (/usr/local/bin) must not stand in for the package's.
rm -f /usr/local/bin/asa
dpkg -i /lab/asa.deb > /lab/out/dpkg-install.log 2>&1; rec install $?
rec on_path "$(command -v asa)"
asa --version > /lab/out/version.txt 2>&1; rec version $?
rec ort_licence "$(test -s /usr/share/doc/asa/onnxruntime/LICENSE && echo present || echo missing)"
# Out of the box.
asa doctor --json > /lab/out/doctor.json 2> /lab/out/doctor.err; rec doctor $?
# This machine's table, within a budget, then named in the config.
start=$(date +%s)
asa calibrate --dir /var/tmp/asa-cal --catalogue /lab/cal.toml --scenarios CAL-GAME,CAL-AUDIO \
  --experts eevdf,bpfland --classes load --budget 3m --duration 3 --settle 0.5 --hold 0 \
  --cooldown 0.2 --work-dir /var/tmp/asa-cal-work > /lab/out/calibrate.log 2>&1; rec calibrate $?
rec calibrate_s $(( $(date +%s) - start ))
rec calibrate_state "$(state)"
cp /var/tmp/asa-cal/mapping.toml /etc/asa/mapping.toml
sed -i 's|^# mapping = .*|mapping = "/etc/asa/mapping.toml"|' /etc/asa/asa.toml
rec mapping_line "$(grep -c '^mapping = "/etc/asa/mapping.toml"' /etc/asa/asa.toml)"
asa mapping show /etc/asa/mapping.toml > /lab/out/mapping-show.txt 2>&1; rec mapping_show $?
# What systemd would start.
EXEC=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/asa.service)
rec exec_start "$EXEC"
$EXEC > /lab/out/run.log 2>&1 &
D=$!
i=0; until asa status --json 2>/dev/null | grep -q '"mode": "daemon"' || [ $i -ge 300 ]; do sleep 0.2; i=$((i+1)); done
sleep 6
asa status --json > /lab/out/status.json; rec status $?
kill -TERM $D
wait $D; rec run_exit $?
rec final_state "$(state)"
# The shipped ONNX Runtime gone (deleted by hand, a broken upgrade).
mkdir -p /opt/onnxruntime
mv /usr/lib/asa/libonnxruntime.so /opt/onnxruntime/libonnxruntime.so
asa doctor > /lab/out/doctor-no-ort.txt 2>&1; rec doctor_no_ort $?
asa run > /lab/out/run-no-ort.out 2> /lab/out/run-no-ort.err; rec run_no_ort $?
rec run_no_ort_state "$(state)"
# The administrator names a library in the installed config, on the commented line the file
# has for it.
sed -i 's|^# onnxruntime = .*|onnxruntime = "/opt/onnxruntime/libonnxruntime.so"|' /etc/asa/asa.toml
rec config_line "$(grep -c '^onnxruntime = ' /etc/asa/asa.toml)"
asa doctor --json > /lab/out/doctor-config.json 2> /lab/out/doctor-config.err; rec doctor_config $?
dpkg -r asa > /lab/out/dpkg-remove.log 2>&1; rec remove $?
rec bin_after_remove "$(test -e /usr/bin/asa && echo present || echo gone)"
rec model_after_remove "$(test -e /usr/share/asa/classifier.onnx && echo present || echo gone)"
rec conf_after_remove "$(test -e /etc/asa/asa.toml && echo kept || echo gone)"
dpkg -P asa > /lab/out/dpkg-purge.log 2>&1; rec purge $?
rec conf_after_purge "$(test -e /etc/asa/asa.toml && echo kept || echo gone)"
"#;

#[test]
#[ignore = "boots the lab VM"]
fn the_package_installs_runs_the_unit_command_and_removes_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let deb = build_package(dir.path());
    let mut run = asa_lab::GuestRun::new("install", SCRIPT);
    // The scenario catalogue: the built-in one with two short scenarios of the xz load (the
    // default model knows it) beside the game and the audio probe.
    let catalogue = dir.path().join("cal.toml");
    std::fs::write(
        &catalogue,
        asa_scenarios::catalogue::calibration_test_catalogue(),
    )
    .unwrap();
    run.files = vec![
        (deb, PathBuf::from("/lab/asa.deb")),
        (catalogue, PathBuf::from("/lab/cal.toml")),
    ];
    // The experts of the built-in table's first choices.
    run.experts = vec!["bpfland".into(), "lavd".into()];
    run.rootfs = Some(asa_lab::RootfsSpec::with_packages(
        asa_lab::TEST_ROOTFS_PACKAGES,
    ));
    run.vm.timeout = std::time::Duration::from_secs(900);
    let lab = Lab::new().expect("the lab is set up (run lab/setup.sh)");
    let out = lab.run(&run).expect("the lab VM ran");
    let file = |name: &str| out.read_out(name).unwrap_or_default();
    eprintln!(
        "---- guest console ----\n{}\n---- dpkg -i ----\n{}\n---- asa calibrate ----\n{}\n---- asa run ----\n{}",
        out.script_output(),
        file("dpkg-install.log"),
        file("calibrate.log"),
        file("run.log")
    );
    assert_eq!(out.exit_code, 0);
    let r = out.read_results("results").unwrap();

    assert_eq!(r["install"], "0", "dpkg -i: {}", file("dpkg-install.log"));
    assert_eq!(r["on_path"], "/usr/bin/asa");
    assert_eq!(r["version"], "0");
    assert_eq!(
        file("version.txt").trim(),
        format!("asa {}", env!("CARGO_PKG_VERSION"))
    );

    // Out of the box: doctor passes on the installed files, ONNX Runtime among them, and the
    // unit's command runs the agent.
    assert_eq!(r["ort_licence"], "present");
    let report = doctor_report(&file("doctor.json"), &file("doctor.err"));
    assert_eq!(r["doctor"], "0", "{report:#}");
    for check in report["checks"].as_array().unwrap() {
        assert_ne!(check["severity"], "fail", "{check}");
    }
    let detail = |name: &str| check_detail(&report, name);
    assert_eq!(detail("onnxruntime"), "/usr/lib/asa/libonnxruntime.so");
    assert!(
        detail("model").contains("/usr/share/asa/classifier.onnx"),
        "{}",
        detail("model")
    );
    assert!(
        detail("config").contains("/etc/asa/asa.toml"),
        "{}",
        detail("config")
    );
    // The budgeted calibration: within its budget (3 min, plus the last run and the report),
    // back on EEVDF, and a table that says how sure each row is.
    assert_eq!(r["calibrate"], "0", "{}", file("calibrate.log"));
    let calibrate_s: u64 = r["calibrate_s"].parse().unwrap();
    eprintln!("budgeted calibration: {calibrate_s} s");
    assert!(
        calibrate_s <= 240,
        "{calibrate_s} s: {}",
        file("calibrate.log")
    );
    assert_eq!(r["calibrate_state"], "disabled");
    assert_eq!(r["mapping_line"], "1", "the config names the table");
    let show = file("mapping-show.txt");
    assert_eq!(r["mapping_show"], "0", "{show}");
    let row = show
        .lines()
        .find(|l| l.starts_with("xz_compress"))
        .unwrap_or_else(|| panic!("no xz_compress row: {show}"));
    assert!(
        row.contains("margin") && (row.contains("settled") || row.contains("open")),
        "{row}"
    );
    assert_eq!(r["exec_start"], "/usr/bin/asa run");
    assert_eq!(r["status"], "0", "{}", file("run.log"));
    let status: Value = serde_json::from_str(&file("status.json")).unwrap();
    assert_eq!(status["agent"]["mode"], "daemon", "{status:#}");
    assert_eq!(
        status["agent"]["decision"]["engine"]["mapping"], "/etc/asa/mapping.toml",
        "the agent runs the calibrated table: {status:#}"
    );
    let decision = &status["agent"]["decision"];
    assert!(
        decision["ticks"].as_u64().unwrap_or(0) >= 1,
        "the agent decides: {status:#}"
    );
    // The calibrated table's best expert runs from the start; with one class mapped to it,
    // nothing is left to decide and the agent settles.
    let best = decision["engine"]["overall_best"]
        .as_str()
        .unwrap_or_else(|| panic!("a calibrated table names its best expert: {status:#}"));
    assert_eq!(status["agent"]["active"]["expert"], best, "{status:#}");
    assert!(
        decision["settled_interval_ms"].as_u64().is_some(),
        "settled on the table's best: {status:#}"
    );
    assert_eq!(r["run_exit"], "0", "{}", file("run.log"));
    assert_eq!(r["final_state"], "disabled", "SIGTERM leaves EEVDF");

    // The shipped ONNX Runtime gone: one clear failure, nothing attached.
    let doctor = file("doctor-no-ort.txt");
    assert_eq!(r["doctor_no_ort"], "1", "{doctor}");
    assert!(
        doctor.contains("onnxruntime")
            && doctor.contains("reinstall")
            && doctor.contains("ORT_DYLIB_PATH"),
        "{doctor}"
    );
    let err = file("run-no-ort.err");
    assert_ne!(r["run_no_ort"], "0");
    assert_eq!(err.matches("asa: error:").count(), 1, "{err}");
    assert!(err.contains("ONNX Runtime"), "{err}");
    assert_eq!(r["run_no_ort_state"], "disabled");
    // A library named in the config serves instead.
    assert_eq!(
        r["config_line"], "1",
        "the config's onnxruntime line was set"
    );
    let report = doctor_report(&file("doctor-config.json"), &file("doctor-config.err"));
    assert_eq!(r["doctor_config"], "0", "{report:#}");
    assert_eq!(
        check_detail(&report, "onnxruntime"),
        "/opt/onnxruntime/libonnxruntime.so"
    );

    // Removal keeps the edited config; purge takes it.
    assert_eq!(r["remove"], "0", "{}", file("dpkg-remove.log"));
    assert_eq!(r["bin_after_remove"], "gone");
    assert_eq!(r["model_after_remove"], "gone");
    assert_eq!(r["conf_after_remove"], "kept");
    assert_eq!(r["purge"], "0", "{}", file("dpkg-purge.log"));
    assert_eq!(r["conf_after_purge"], "gone");
}

/// `asa doctor --json`'s report (its stderr shown when it is not JSON).
fn doctor_report(json: &str, stderr: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("doctor --json: {e}: {stderr}"))
}

/// The detail of a doctor report's check `name`.
fn check_detail(report: &Value, name: &str) -> String {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))["detail"]
        .as_str()
        .unwrap()
        .to_owned()
}
