//! Finding an expert's executable: the project cache, explicit directories, then `PATH`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::catalogue::{Expert, ExpertKind};

/// The project cache: `$ASA_CACHE`, else `$XDG_CACHE_HOME/asa`, else `~/.cache/asa`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ASA_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("asa");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache").join("asa")
}

/// The ONNX Runtime release `gru_expert/setup_ort.sh` puts into the project cache.
pub const ORT_VERSION: &str = "1.32.0";

/// Where `gru_expert/setup_ort.sh` (run by `lab/setup.sh`) puts ONNX Runtime's shared library:
/// `$ASA_CACHE/onnxruntime-<ORT_VERSION>/libonnxruntime.so`.
pub fn cached_ort_library() -> PathBuf {
    cache_dir()
        .join(format!("onnxruntime-{ORT_VERSION}"))
        .join("libonnxruntime.so")
}

/// ONNX Runtime's telemetry opt-out. Official builds since 1.29 send telemetry on Linux too:
/// at its first environment, 1.32 starts a thread that keeps a device id and an offline cache in
/// `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` and resolves and connects to an upload
/// endpoint (seen from scx_gru, in the middle of a measured load in the lab VM). The variable
/// set to `1` before ONNX Runtime initializes turns all of it off.
pub const ORT_TELEMETRY_OPT_OUT: &str = "ORT_DISABLE_TELEMETRY";

/// Opts the process out of ONNX Runtime's telemetry: sets `ORT_DISABLE_TELEMETRY=1` unless the
/// variable is set already (an explicit choice wins). Call it first thing in `main`, while the
/// process has one thread (setting the environment races with threads that read it), before
/// ONNX Runtime is loaded.
pub fn opt_out_of_ort_telemetry() {
    if std::env::var_os(ORT_TELEMETRY_OPT_OUT).is_none() {
        std::env::set_var(ORT_TELEMETRY_OPT_OUT, "1");
    }
}

/// Whether ONNX Runtime's telemetry is off in this process (`ORT_DISABLE_TELEMETRY=1`).
pub fn ort_telemetry_off() -> bool {
    std::env::var_os(ORT_TELEMETRY_OPT_OUT).is_some_and(|v| v == "1")
}

/// Called by a loader just before it initializes ONNX Runtime: warns when telemetry is on, so
/// a program that skipped [`opt_out_of_ort_telemetry`] (or a user who turned it on) hears of it.
/// `program` names whose `main` opts out.
pub fn warn_if_ort_telemetry_on(program: &str) {
    if !ort_telemetry_off() {
        log::warn!(
            "ONNX Runtime's telemetry is on ({ORT_TELEMETRY_OPT_OUT}=1 is not set): it may write \
             to ~/.cache/Microsoft and connect to an upload endpoint; {program}'s main sets it, \
             a library user should too"
        );
    }
}

/// Where `cargo install --root` puts the experts from crates.io.
pub fn experts_cache_dir() -> PathBuf {
    cache_dir().join("experts")
}

/// The directories searched for an expert's binary, in order.
pub fn search_dirs(expert: &Expert) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(list) = std::env::var_os("ASA_EXPERTS_PATH") {
        dirs.extend(std::env::split_paths(&list));
    }
    match expert.kind {
        ExpertKind::ScxCrate => {
            if let Some(root) = expert.install_root_name() {
                dirs.push(experts_cache_dir().join(root).join("bin"));
            }
        }
        ExpertKind::Workspace => {
            // Built by cargo next to the `asa` binary (target/<profile>/); from a test or an
            // example (target/<profile>/{deps,examples}/), the folder above.
            if let Some(dir) = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(Path::to_owned))
            {
                let in_cargo_subdir = matches!(
                    dir.file_name().and_then(|n| n.to_str()),
                    Some("deps" | "examples")
                );
                let parent = dir.parent().map(Path::to_owned);
                dirs.push(dir);
                if let Some(parent) = parent.filter(|_| in_cargo_subdir) {
                    dirs.push(parent);
                }
            }
        }
        ExpertKind::KernelDefault => {}
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs
}

/// The executable for `expert`, or an error that says how to install it.
pub fn locate_binary(expert: &Expert) -> Result<PathBuf> {
    if expert.is_kernel_default() {
        bail!(
            "expert {} is the kernel default and has no binary",
            expert.name
        );
    }
    if !expert.available {
        bail!(
            "expert {} is declared in the catalogue but not available yet: {}",
            expert.name,
            expert.description
        );
    }
    let name = expert.binary_name();
    let dirs = search_dirs(expert);
    for dir in &dirs {
        let candidate = dir.join(name);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    let how = match expert.kind {
        ExpertKind::ScxCrate => format!(
            "install it with `lab/setup.sh` (it runs `cargo install --locked --root {}/{} {}@{}`)",
            experts_cache_dir().display(),
            expert.install_root_name().unwrap_or_default(),
            expert.crate_name.as_deref().unwrap_or_default(),
            expert.version.as_deref().unwrap_or_default()
        ),
        _ => format!(
            "build it with `cargo build -p {}`",
            expert.package.as_deref().unwrap_or_default()
        ),
    };
    bail!(
        "expert {}: executable {name:?} not found (searched $ASA_EXPERTS_PATH, the project cache and $PATH); {how}",
        expert.name
    )
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalogue;

    #[test]
    fn missing_binary_error_says_how_to_install() {
        let mut expert = Catalogue::builtin().get("bpfland").unwrap().clone();
        expert.binary = Some("scx_definitely_not_installed".into());
        let err = locate_binary(&expert).unwrap_err().to_string();
        assert!(err.contains("not found"), "{err}");
        assert!(err.contains("cargo install --locked"), "{err}");
        assert!(err.contains("scx_bpfland@1.1.4"), "{err}");
    }

    #[test]
    fn ort_version_is_the_one_setup_ort_installs() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../gru_expert/setup_ort.sh"),
        )
        .unwrap();
        assert!(
            script
                .lines()
                .any(|l| l == format!("version={ORT_VERSION}")),
            "gru_expert/setup_ort.sh does not install ONNX Runtime {ORT_VERSION}"
        );
        assert!(
            cached_ort_library().ends_with(format!("onnxruntime-{ORT_VERSION}/libonnxruntime.so"))
        );
    }

    #[test]
    fn workspace_experts_are_searched_above_test_binaries() {
        // This test runs from target/<profile>/deps/: scx_gru is built one folder up.
        let gru = Catalogue::builtin().get("gru").unwrap().clone();
        let exe = std::env::current_exe().unwrap();
        let deps = exe.parent().unwrap();
        let dirs = search_dirs(&gru);
        assert_eq!(
            dirs[..2],
            [deps.to_owned(), deps.parent().unwrap().to_owned()]
        );
    }

    #[test]
    fn unavailable_and_default_entries_have_no_binary() {
        let c = Catalogue::builtin();
        assert!(locate_binary(c.get("eevdf").unwrap()).is_err());
        let mut gru = c.get("gru").unwrap().clone();
        gru.available = false;
        assert!(locate_binary(&gru)
            .unwrap_err()
            .to_string()
            .contains("not available yet"));
    }
}
