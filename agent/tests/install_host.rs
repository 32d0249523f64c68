//! The install: `make install` / `make uninstall` and the Debian package
//! (`packaging/build-deb.sh`), both from packaging/files.txt, staged into temporary roots with
//! this build's `asa`. Each file of the list lands where it says, the agent's own lookups (its
//! config, its models) are among them, the installed `asa` runs and reads the installed files,
//! and the package holds exactly the files `make install` installs.
//!
//! Needs make, ONNX Runtime in the project cache (gru_expert/setup_ort.sh: the install ships
//! it) and, for the package, dpkg-deb, dpkg-shlibdeps and strip (`apt-get install dpkg-dev`;
//! lab/setup.sh runs both).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use asa_agent::daemon::settings::DEFAULT_CONFIG;
use asa_agent::decision::app_model::DEFAULT_APP_MODEL_PATHS;
use asa_agent::decision::classifier::{cached_ort_library, ort_library_beside};
use asa_agent::decision::engine::DEFAULT_MODEL_PATHS;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The `asa` binary of this build.
fn asa_bin() -> &'static str {
    env!("CARGO_BIN_EXE_asa")
}

/// Runs `cmd`, failing the test with its output when it fails.
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pinned ONNX Runtime the install ships, in the project cache.
fn cached_ort() -> PathBuf {
    let lib = cached_ort_library();
    for file in ["libonnxruntime.so", "LICENSE", "ThirdPartyNotices.txt"] {
        let path = lib.with_file_name(file);
        assert!(
            path.is_file(),
            "{} missing: run gru_expert/setup_ort.sh",
            path.display()
        );
    }
    lib
}

/// `make install` (or `uninstall`) into `destdir` with `prefix`, this build's `asa`.
fn make(target: &str, destdir: &Path, prefix: &str) -> Output {
    run(Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(workspace())
        .arg(target)
        .arg(format!("DESTDIR={}", destdir.display()))
        .arg(format!("PREFIX={prefix}"))
        .arg(format!("ASA_BIN={}", asa_bin())))
}

/// One file of the list: where it goes (without DESTDIR) and its flag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    path: String,
    flag: Option<String>,
}

/// The files `packaging/install.sh list` names for `prefix`.
fn listed(prefix: &str) -> Vec<Listed> {
    let out = run(Command::new(workspace().join("packaging/install.sh"))
        .arg("list")
        .env("PREFIX", prefix)
        .env_remove("DESTDIR"));
    stdout(&out)
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            Listed {
                path: words.next().unwrap().to_owned(),
                flag: words.next().map(str::to_owned),
            }
        })
        .collect()
}

fn paths(list: &[Listed]) -> BTreeSet<String> {
    list.iter().map(|l| l.path.clone()).collect()
}

/// `path` (absolute) under `root`.
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The `ExecStart=` line of a unit file.
fn exec_start(unit: &Path) -> String {
    std::fs::read_to_string(unit)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_else(|| panic!("{} has no ExecStart", unit.display()))
        .to_owned()
}

#[test]
fn the_list_holds_what_the_agent_looks_up_under_both_prefixes() {
    for (prefix, bin) in [
        ("/usr", "/usr/bin/asa"),
        ("/usr/local", "/usr/local/bin/asa"),
    ] {
        let all = paths(&listed(prefix));
        assert!(all.contains(bin), "{prefix}: {all:?}");
        let ort = ort_library_beside(Path::new(bin)).unwrap();
        assert!(
            all.contains(ort.to_str().unwrap()),
            "{prefix}: no ONNX Runtime where the installed asa looks ({}): {all:?}",
            ort.display()
        );
        assert!(
            all.contains(&format!("{prefix}/share/doc/asa/onnxruntime/LICENSE")),
            "{prefix}: ONNX Runtime's licence: {all:?}"
        );
        assert!(all.contains(DEFAULT_CONFIG), "{prefix}: {all:?}");
        for (what, lookup) in [
            ("classifier model", DEFAULT_MODEL_PATHS),
            ("application model", DEFAULT_APP_MODEL_PATHS),
        ] {
            assert!(
                lookup.iter().any(|p| all.contains(*p)),
                "{prefix}: no {what} where the agent looks ({lookup:?}): {all:?}"
            );
        }
        for path in [
            format!("{prefix}/lib/systemd/system/asa.service"),
            format!("{prefix}/share/asa/mapping/default.toml"),
            format!("{prefix}/share/asa/mapping/per-application.toml"),
            format!("{prefix}/share/asa/layers/default.toml"),
            "/usr/share/dbus-1/system.d/org.scx.Loader.conf".to_owned(),
            "/usr/share/polkit-1/actions/org.scx.Loader.policy".to_owned(),
        ] {
            assert!(all.contains(&path), "{prefix}: {path} missing: {all:?}");
        }
    }
}

#[test]
fn make_install_puts_every_listed_file_in_place_and_uninstall_takes_them_away() {
    let ort = cached_ort();
    let root = tempfile::tempdir().unwrap();
    let list = listed("/usr");
    make("install", root.path(), "/usr");
    for file in &list {
        let installed = under(root.path(), &file.path);
        let meta = std::fs::metadata(&installed)
            .unwrap_or_else(|e| panic!("{} not installed: {e}", file.path));
        assert!(meta.is_file(), "{}", file.path);
        let mode = meta.permissions().mode() & 0o777;
        let want = if file.path.ends_with("/bin/asa") {
            0o755
        } else {
            0o644
        };
        assert_eq!(mode, want, "{}: mode {mode:o}", file.path);
    }
    assert_eq!(
        exec_start(&under(root.path(), "/usr/lib/systemd/system/asa.service")),
        "ExecStart=/usr/bin/asa run"
    );
    for (installed, source) in [
        (
            "/usr/share/asa/classifier.onnx",
            "classifier/models/default/classifier.onnx",
        ),
        ("/etc/asa/asa.toml", "agent/dist/asa.toml"),
        (
            "/usr/share/asa/mapping/per-application.toml",
            "mapping/tables/per-application.toml",
        ),
        ("/usr/lib/asa/libonnxruntime.so", ort.to_str().unwrap()),
    ] {
        assert_eq!(
            std::fs::read(under(root.path(), installed)).unwrap(),
            std::fs::read(workspace().join(source)).unwrap(),
            "{installed} is not {source}"
        );
    }

    let asa = under(root.path(), "/usr/bin/asa");
    let version = run(Command::new(&asa).arg("--version"));
    assert_eq!(
        stdout(&version).trim(),
        format!("asa {}", env!("CARGO_PKG_VERSION"))
    );
    for table in ["default.toml", "per-application.toml"] {
        let path = under(root.path(), &format!("/usr/share/asa/mapping/{table}"));
        let shown = run(Command::new(&asa).arg("mapping").arg("show").arg(&path));
        assert!(
            stdout(&shown).starts_with("asa.mapping v1"),
            "{table}: {}",
            stdout(&shown)
        );
    }

    make("uninstall", root.path(), "/usr");
    for file in &list {
        assert!(
            !under(root.path(), &file.path).exists(),
            "{} left behind",
            file.path
        );
    }
    assert!(!under(root.path(), "/usr/share/asa").exists());
    assert!(!under(root.path(), "/usr/lib/asa").exists());
    assert!(!under(root.path(), "/usr/share/doc/asa").exists());
    assert!(!under(root.path(), "/etc/asa").exists());
}

#[test]
fn make_install_keeps_a_changed_config_and_uninstall_leaves_it() {
    let root = tempfile::tempdir().unwrap();
    let config = under(root.path(), DEFAULT_CONFIG);
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "interval_ms = 500\n").unwrap();
    let out = make("install", root.path(), "/usr");
    assert!(stdout(&out).contains(&format!("kept {}", config.display())));
    make("uninstall", root.path(), "/usr");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "interval_ms = 500\n"
    );
}

#[test]
fn the_debian_package_holds_the_listed_files_owned_by_root_with_its_conffile() {
    cached_ort();
    let out_dir = tempfile::tempdir().unwrap();
    let built = run(Command::new(workspace().join("packaging/build-deb.sh"))
        .args(["--binary", asa_bin()])
        .arg("--out")
        .arg(out_dir.path())
        .args(["--compression", "none"]));
    let deb = PathBuf::from(stdout(&built).trim());
    let arch = stdout(&run(Command::new("dpkg").arg("--print-architecture")));
    assert_eq!(
        deb,
        out_dir.path().join(format!(
            "asa_{}_{}.deb",
            env!("CARGO_PKG_VERSION"),
            arch.trim()
        ))
    );

    let field = |name: &str| {
        stdout(&run(Command::new("dpkg-deb")
            .arg("--field")
            .arg(&deb)
            .arg(name)))
        .trim()
        .to_owned()
    };
    assert_eq!(field("Package"), "asa");
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    let depends = field("Depends");
    assert!(depends.contains("libc6 (>= "), "{depends}");
    // ONNX Runtime's own: the C++ runtime.
    assert!(depends.contains("libstdc++6"), "{depends}");

    let contents = stdout(&run(Command::new("dpkg-deb").arg("--contents").arg(&deb)));
    let mut files = BTreeSet::new();
    for line in contents.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1], "root/root", "{line}");
        if words[0].starts_with('-') {
            files.insert(words[5].trim_start_matches('.').to_owned());
        }
    }
    let list = listed("/usr");
    assert_eq!(files, paths(&list), "the package is not the list");

    let control = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb")
        .arg("--control")
        .arg(&deb)
        .arg(control.path()));
    let conffiles: Vec<String> = std::fs::read_to_string(control.path().join("conffiles"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let configs: Vec<String> = list
        .iter()
        .filter(|l| l.flag.as_deref() == Some("config"))
        .map(|l| l.path.clone())
        .collect();
    assert_eq!(conffiles, configs);
    assert_eq!(conffiles, [DEFAULT_CONFIG]);

    let tree = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb")
        .arg("--extract")
        .arg(&deb)
        .arg(tree.path()));
    assert_eq!(
        exec_start(&under(tree.path(), "/usr/lib/systemd/system/asa.service")),
        "ExecStart=/usr/bin/asa run"
    );
    let packaged = under(tree.path(), "/usr/bin/asa");
    let version = run(Command::new(&packaged).arg("--version"));
    assert_eq!(
        stdout(&version).trim(),
        format!("asa {}", env!("CARGO_PKG_VERSION"))
    );
}

/// What `asa doctor --json` says of the check called `name`: its severity and detail.
fn doctor_check(report: &serde_json::Value, name: &str) -> (String, String) {
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"));
    (
        check["severity"].as_str().unwrap().to_owned(),
        check["detail"].as_str().unwrap().to_owned(),
    )
}

/// The installed `asa` pointed at the installed files (its own lookups are of /usr/share/asa
/// and /etc/asa, which a test cannot write), but for ONNX Runtime, which it finds under its own
/// prefix: `asa doctor` loads the config, both models and the built-in mapping table against
/// the model, as `asa run` would. The installed tables are
/// copies for `--mapping` and for editing (the agent's default table is built in); each is read
/// by the installed `asa` in the test above.
#[test]
fn the_installed_asa_loads_the_installed_config_models_and_onnx_runtime() {
    cached_ort();
    let root = tempfile::tempdir().unwrap();
    make("install", root.path(), "/usr");
    let file = |path: &str| under(root.path(), path);
    let out = Command::new(file("/usr/bin/asa"))
        .arg("doctor")
        .arg("--json")
        .arg("--config")
        .arg(file(DEFAULT_CONFIG))
        .arg("--model")
        .arg(file("/usr/share/asa/classifier.onnx"))
        .arg("--app-model")
        .arg(file("/usr/share/asa/app-classifier.onnx"))
        .env_remove("ORT_DYLIB_PATH")
        .output()
        .unwrap();
    // Its exit status says whether `asa run` can run on this host (no sched_ext here): not
    // this test's question.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", stdout(&out)));
    for (name, installed) in [
        ("config", DEFAULT_CONFIG),
        ("model", "/usr/share/asa/classifier.onnx"),
        ("app model", "/usr/share/asa/app-classifier.onnx"),
        ("onnxruntime", "/usr/lib/asa/libonnxruntime.so"),
    ] {
        let (severity, detail) = doctor_check(&report, name);
        assert_eq!(severity, "ok", "{name}: {detail}");
        assert!(
            detail.contains(&file(installed).display().to_string()),
            "{name} is not the installed {installed}: {detail}"
        );
    }
    // Checked against the installed model; a table whose experts are not all installed here
    // warns.
    let (severity, detail) = doctor_check(&report, "mapping");
    assert!(
        severity == "ok" || severity == "warn",
        "mapping: {severity} {detail}"
    );
    assert!(detail.contains("built in"), "{detail}");
}
