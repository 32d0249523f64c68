//! scx_loader's D-Bus interface on the host, no sched_ext needed: a private `dbus-daemon`, the
//! real `asa` binary serving `org.scx.Loader` (`asa dbus` beside an agent, `asa run --dry-run
//! --dbus`), and the real `scxctl` (the pinned version, from the project cache) driving it.
//!
//! The agent behind `asa dbus` is a fake that speaks the control protocol on a socket
//! (`control::server::serve`, as `asa run` does): the real controller needs sched_ext, and what is
//! tested here is the mapping of scx_loader's calls to control requests, and that `asa status`
//! (asking the same agent) agrees with what scxctl reports. The VM test (vm_dbus.rs) drives
//! the real agent.

mod daemon_common;
mod dbus_common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use asa_agent::control::{self, AgentStatus, AppsStatus, DecisionStatus, Request, Response};
use asa_experts::Active;

/// A private `dbus-daemon` in a temporary directory (readable by every user, for the tests
/// that call as `nobody`); killed on drop.
struct PrivateBus {
    daemon: Child,
    dir: tempfile::TempDir,
    address: String,
}

impl PrivateBus {
    /// Starts a bus with the configuration `config(socket path)`.
    fn start(config: impl FnOnce(&Path) -> String) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("system_bus_socket");
        let conf = dir.path().join("bus.conf");
        std::fs::write(&conf, config(&socket)).unwrap();
        let mut daemon = Command::new("dbus-daemon")
            .arg("--nofork")
            .arg(format!("--config-file={}", conf.display()))
            .arg("--print-address=1")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("dbus-daemon.log")).unwrap())
            .spawn()
            .expect("dbus-daemon runs (Debian package dbus-daemon)");
        let mut line = String::new();
        BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("unix:path="), "dbus-daemon said {line:?}");
        PrivateBus {
            daemon,
            dir,
            address: line.trim().to_owned(),
        }
    }

    fn open() -> Self {
        Self::start(dbus_common::open_bus_config)
    }

    /// True when someone owns `org.scx.Loader`.
    fn name_owned(&self) -> bool {
        let conn = zbus::blocking::connection::Builder::address(self.address.as_str())
            .unwrap()
            .build()
            .unwrap();
        let bus = zbus::blocking::fdo::DBusProxy::new(&conn).unwrap();
        bus.name_has_owner(asa_agent::dbus::BUS_NAME.try_into().unwrap())
            .unwrap()
    }

    /// Waits (10 s at most) until the name is owned, or not.
    fn wait_for_name(&self, owned: bool) {
        let t0 = Instant::now();
        while self.name_owned() != owned {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "org.scx.Loader still {}owned after 10 s",
                if owned { "not " } else { "" }
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// What the fake agent does and was asked.
struct FakeState {
    active: String,
    pinned: Option<String>,
    /// Where `unpin` returns to (the agent's own choice).
    choice: String,
    /// The table's default expert (DefaultScheduler).
    default_expert: Option<String>,
    requests: Vec<Request>,
    /// Pins of these experts fail with the error given.
    fail: HashMap<String, String>,
    /// Pins of these experts take this long.
    slow: HashMap<String, Duration>,
    /// Per-application mode's status, when the fake runs in it.
    apps: Option<AppsStatus>,
}

impl FakeState {
    fn status(&self) -> AgentStatus {
        let mut st = AgentStatus::new(
            "daemon",
            Active {
                expert: self.active.clone(),
                since_unix_ms: asa_experts::supervisor::unix_ms(SystemTime::now()),
                pid: None,
            },
            "a fake agent for the D-Bus tests",
        );
        st.pinned = self.pinned.clone();
        let mut decision = decision(self.default_expert.clone());
        decision.apps = self.apps.clone();
        st.decision = Some(decision);
        st
    }
}

/// A decision engine's status whose table has `default_expert`.
fn decision(default_expert: Option<String>) -> DecisionStatus {
    DecisionStatus::new(asa_agent::decision::engine::EngineInfo {
        default_expert,
        ..Default::default()
    })
}

/// A fake agent on a control socket: `pin` runs the expert and pins it, `unpin` returns to
/// its own choice, `status` says so, like `asa run`'s controller.
struct FakeAgent {
    state: Arc<Mutex<FakeState>>,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl FakeAgent {
    fn serve(socket: &Path, running: &str, default_expert: Option<&str>) -> Self {
        let state = Arc::new(Mutex::new(FakeState {
            active: running.into(),
            pinned: None,
            choice: running.into(),
            default_expert: default_expert.map(str::to_owned),
            requests: vec![],
            fail: HashMap::new(),
            slow: HashMap::new(),
            apps: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let shared = state.clone();
        let server = control::server::serve(
            control::server::bind(socket).unwrap(),
            stop.clone(),
            move |request| {
                let slow = match &request {
                    Request::Pin { expert } => shared.lock().unwrap().slow.get(expert).copied(),
                    _ => None,
                };
                if let Some(pause) = slow {
                    std::thread::sleep(pause);
                }
                let mut st = shared.lock().unwrap();
                if request != Request::Status {
                    st.requests.push(request.clone());
                }
                match request {
                    Request::Status => {}
                    Request::Pin { expert } => {
                        if let Some(error) = st.fail.get(&expert) {
                            return control::refusal(error.clone());
                        }
                        st.active = expert.clone();
                        st.pinned = Some(expert);
                    }
                    Request::Unpin => {
                        st.pinned = None;
                        st.active = st.choice.clone();
                    }
                    Request::Apps | Request::AppSet { .. } | Request::AppUnset { .. } => {
                        return control::refusal("not a per-application agent");
                    }
                }
                Response {
                    ok: true,
                    error: None,
                    status: Some(st.status()),
                    switch: None,
                }
            },
        );
        FakeAgent {
            state,
            socket: socket.to_owned(),
            stop,
            server: Some(server),
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            control::server::stop_serving(&self.socket, &self.stop, server);
        }
    }
}

fn asa() -> Command {
    Command::new(env!("CARGO_BIN_EXE_asa"))
}

/// A child process killed when dropped (a failed assertion leaves none behind).
struct Running(Child);

impl Running {
    /// SIGTERM, and its exit status.
    fn sigterm(mut self) -> std::process::ExitStatus {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        self.0.wait().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `asa --socket SOCKET dbus` on `bus`, its log to `log`; returns once it owns the name.
fn asa_dbus(bus: &PrivateBus, socket: &Path, log: &Path) -> Running {
    let child = asa()
        .arg("--socket")
        .arg(socket)
        .arg("dbus")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let child = Running(child);
    bus.wait_for_name(true);
    child
}

/// What a command did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn ran(cmd: &mut Command) -> Ran {
    let out = cmd.output().unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// `scxctl ARGS` against `bus` (as `uid` when given).
fn scxctl_cmd(scxctl: &Path, bus: &PrivateBus, uid: Option<u32>, args: &[&str]) -> Command {
    let mut cmd = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg(scxctl);
            c
        }
        None => Command::new(scxctl),
    };
    cmd.args(args)
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .env("NO_COLOR", "1")
        .env("CLICOLOR", "0");
    cmd
}

fn scxctl(scxctl: &Path, bus: &PrivateBus, args: &[&str]) -> Ran {
    ran(&mut scxctl_cmd(scxctl, bus, None, args))
}

/// `scxctl ARGS` that must succeed and print exactly `line`.
fn scxctl_says(bin: &Path, bus: &PrivateBus, args: &[&str], line: &str) {
    let r = scxctl(bin, bus, args);
    assert_eq!(r.code, Some(0), "scxctl {args:?}: {r:?}");
    assert_eq!(r.stdout.trim(), line, "scxctl {args:?}: {r:?}");
}

/// `asa status --json` of the agent on `socket`: (active expert, pinned expert).
fn asa_status(socket: &Path) -> (String, Option<String>) {
    let out = asa()
        .arg("--socket")
        .arg(socket)
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let agent = &json["agent"];
    (
        agent["active"]["expert"].as_str().unwrap().to_owned(),
        agent["pinned"].as_str().map(str::to_owned),
    )
}

/// The `org.freedesktop.DBus.Properties` proxy of the served object on `conn`.
fn properties_proxy(
    conn: &zbus::blocking::Connection,
) -> zbus::blocking::fdo::PropertiesProxy<'static> {
    zbus::blocking::fdo::PropertiesProxy::builder(conn)
        .destination(asa_agent::dbus::BUS_NAME)
        .unwrap()
        .path(asa_agent::dbus::OBJECT_PATH)
        .unwrap()
        .build()
        .unwrap()
}

/// The (property, string value) pairs of the PropertiesChanged signals on `bus` (of either
/// interface: org.scx.Loader and org.asa.Agent1), from the moment this returns.
fn properties_changed(bus: &PrivateBus) -> std::sync::mpsc::Receiver<(String, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (subscribed, ready) = std::sync::mpsc::channel();
    let address = bus.address.clone();
    std::thread::spawn(move || {
        let conn = zbus::blocking::connection::Builder::address(address.as_str())
            .unwrap()
            .build()
            .unwrap();
        let proxy = properties_proxy(&conn);
        let signals = proxy.receive_properties_changed().unwrap();
        subscribed.send(()).unwrap();
        for signal in signals {
            let args = signal.args().unwrap();
            for (name, value) in args.changed_properties() {
                let value = match value {
                    zbus::zvariant::Value::Str(s) => s.to_string(),
                    other => format!("{other:?}"),
                };
                if tx.send((name.to_string(), value)).is_err() {
                    return;
                }
            }
        }
    });
    ready.recv_timeout(Duration::from_secs(5)).unwrap();
    rx
}

fn pin(expert: &str) -> Request {
    Request::Pin {
        expert: expert.into(),
    }
}

/// scxctl's get / list / switch / stop / start / restore / restart against `asa dbus` become
/// the agent's pin / unpin, print what they print against scx_loader, and `asa status` (the
/// same agent) agrees after each.
#[test]
fn scxctl_drives_the_agent_through_asa_dbus_and_asa_status_agrees() {
    let Some(bin) = dbus_common::scxctl() else {
        return;
    };
    let bus = PrivateBus::open();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let agent = FakeAgent::serve(&socket, "rusty", Some("bpfland"));
    let log = dir.path().join("asa-dbus.log");
    let server = asa_dbus(&bus, &socket, &log);

    // The agent's own choice runs, unpinned.
    scxctl_says(&bin, &bus, &["get"], "running Rusty in Auto mode");
    scxctl_says(
        &bin,
        &bus,
        &["list"],
        r#"supported schedulers: ["bpfland", "lavd", "rusty", "p2dq", "flash", "cosmos", "gru", "layered"]"#,
    );
    assert_eq!(asa_status(&socket), ("rusty".into(), None));

    // switch = asa pin.
    scxctl_says(
        &bin,
        &bus,
        &["switch", "--sched", "bpfland"],
        "switched to Bpfland in Auto mode",
    );
    assert_eq!(agent.requests(), [pin("bpfland")]);
    assert_eq!(
        asa_status(&socket),
        ("bpfland".into(), Some("bpfland".into()))
    );
    scxctl_says(&bin, &bus, &["get"], "running Bpfland in Auto mode");

    // A mode other than Auto is refused before the agent is asked; scxctl warns first (the
    // interface lists Auto as the only configured mode) and then reports the error.
    let r = scxctl(
        &bin,
        &bus,
        &["switch", "--sched", "lavd", "--mode", "gaming"],
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("no configured arguments for Gaming mode"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("mode Gaming (1) is not supported"),
        "{r:?}"
    );
    // Custom arguments likewise.
    let r = scxctl(&bin, &bus, &["switch", "--sched", "lavd", "--args=-s 2000"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("custom scheduler arguments"), "{r:?}");
    assert_eq!(agent.requests().len(), 1);

    // The agent's refusal reaches scxctl, and nothing changes.
    agent.state.lock().unwrap().fail.insert(
        "lavd".into(),
        "switch to lavd failed: it exited before attaching; bpfland still runs".into(),
    );
    let r = scxctl(&bin, &bus, &["switch", "--sched", "lavd"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr
            .contains("switch to lavd failed: it exited before attaching"),
        "{r:?}"
    );
    assert_eq!(agent.requests().last(), Some(&pin("lavd")));
    assert_eq!(
        asa_status(&socket),
        ("bpfland".into(), Some("bpfland".into()))
    );
    agent.state.lock().unwrap().fail.clear();

    // A switch that takes seconds does not hold up another caller's get.
    agent
        .state
        .lock()
        .unwrap()
        .slow
        .insert("lavd".into(), Duration::from_secs(3));
    let slow = scxctl_cmd(&bin, &bus, None, &["switch", "--sched", "lavd"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    scxctl_says(&bin, &bus, &["get"], "running Bpfland in Auto mode");
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "get took {took:?}");
    let slow = slow.wait_with_output().unwrap();
    assert!(slow.status.success());
    assert_eq!(
        String::from_utf8_lossy(&slow.stdout).trim(),
        "switched to Lavd in Auto mode"
    );
    assert_eq!(asa_status(&socket), ("lavd".into(), Some("lavd".into())));

    // stop = asa pin eevdf: no scx scheduler runs, and the agent keeps it so.
    scxctl_says(&bin, &bus, &["stop"], "stopped");
    assert_eq!(agent.requests().last(), Some(&pin("eevdf")));
    assert_eq!(asa_status(&socket), ("eevdf".into(), Some("eevdf".into())));
    scxctl_says(&bin, &bus, &["get"], "no scx scheduler running");
    // As against scx_loader, scxctl refuses to switch when nothing runs.
    let asked = agent.requests().len();
    let r = scxctl(&bin, &bus, &["switch", "--sched", "bpfland"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr
            .contains("no scx scheduler running, use 'start' instead of 'switch'"),
        "{r:?}"
    );
    assert_eq!(agent.requests().len(), asked);
    let r = scxctl(&bin, &bus, &["restart"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr
            .contains("No scheduler is currently running to restart"),
        "{r:?}"
    );

    // start = asa pin, restore = asa unpin (the agent's choice runs again).
    scxctl_says(
        &bin,
        &bus,
        &["start", "--sched", "lavd"],
        "started Lavd in Auto mode",
    );
    assert_eq!(asa_status(&socket), ("lavd".into(), Some("lavd".into())));
    scxctl_says(
        &bin,
        &bus,
        &["restore"],
        "restored default scheduler Bpfland in Auto mode",
    );
    assert_eq!(agent.requests().last(), Some(&Request::Unpin));
    assert_eq!(asa_status(&socket), ("rusty".into(), None));
    scxctl_says(&bin, &bus, &["get"], "running Rusty in Auto mode");
    // restart = a pin of what runs.
    scxctl_says(&bin, &bus, &["restart"], "restarted");
    assert_eq!(agent.requests().last(), Some(&pin("rusty")));
    assert_eq!(asa_status(&socket), ("rusty".into(), Some("rusty".into())));

    // "auto", which scxctl cannot send, is the agent's choice for other clients.
    let conn = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .build()
        .unwrap();
    conn.call_method(
        Some(asa_agent::dbus::BUS_NAME),
        asa_agent::dbus::OBJECT_PATH,
        Some("org.scx.Loader"),
        "SwitchScheduler",
        &("auto", 0u32),
    )
    .unwrap();
    assert_eq!(agent.requests().last(), Some(&Request::Unpin));
    assert_eq!(asa_status(&socket), ("rusty".into(), None));

    // PropertiesChanged follows the agent's own switches too, not only the D-Bus calls.
    let changes = properties_changed(&bus);
    {
        let mut st = agent.state.lock().unwrap();
        st.active = "lavd".into();
        st.pinned = None;
    }
    let changed = changes
        .recv_timeout(Duration::from_secs(5))
        .expect("PropertiesChanged within 5 s of the agent's switch");
    assert_eq!(changed, ("CurrentScheduler".into(), "scx_lavd".into()));
    scxctl_says(&bin, &bus, &["get"], "running Lavd in Auto mode");
    // scxctl knows scx_loader's schedulers only: gru runs, and it cannot name it.
    agent.state.lock().unwrap().active = "gru".into();
    let r = scxctl(&bin, &bus, &["get"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("scx_gru is not supported"), "{r:?}");

    // SIGTERM: a clean exit that releases the name; each call was logged.
    assert!(server.sigterm().success());
    bus.wait_for_name(false);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains("serving org.scx.Loader at /org/scx/Loader"),
        "{log}"
    );
    assert!(
        log.contains("D-Bus SwitchScheduler from") && log.contains("Pin { expert: \"bpfland\" }"),
        "{log}"
    );
}

/// `asa run --dry-run --dbus` serves the interface from the dry run's state: what the kernel
/// runs (no sched_ext here: EEVDF, so "no scx scheduler running"), and every switch refused
/// as a pin is.
#[test]
fn asa_run_dry_run_dbus_reports_the_kernels_scheduler_and_refuses_switches() {
    let Some(bin) = dbus_common::scxctl() else {
        return;
    };
    let bus = PrivateBus::open();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let run = asa()
        .arg("--socket")
        .arg(&socket)
        .args([
            "run",
            "--dry-run",
            "--no-bpf",
            "--dbus",
            "--interval-ms",
            "200",
        ])
        .args(["--duration-s", "60", "--onnxruntime"])
        .arg(daemon_common::ort_library())
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run = Running(run);
    bus.wait_for_name(true);
    let (kernel_runs, _) = asa_status(&socket);
    if kernel_runs == "eevdf" {
        scxctl_says(&bin, &bus, &["get"], "no scx scheduler running");
    }
    let r = scxctl(&bin, &bus, &["start", "--sched", "bpfland"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("dry run"), "{r:?}");
    assert!(run.sigterm().success());
    bus.wait_for_name(false);
}

/// `org.asa.Agent1`, beside scx_loader's interface: the mode and applications `asa status`
/// has, read by any client, and a change signalled within the watch interval.
#[test]
fn the_agent_interface_reports_the_mode_and_signals_its_change() {
    let bus = PrivateBus::open();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let agent = FakeAgent::serve(&socket, "cosmos", Some("cosmos"));
    let log = dir.path().join("asa-dbus.log");
    let server = asa_dbus(&bus, &socket, &log);
    let conn = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .build()
        .unwrap();
    let proxy = properties_proxy(&conn);
    let face =
        zbus::names::InterfaceName::try_from(asa_agent::dbus::agent_interface::INTERFACE).unwrap();
    let get = |name: &str| -> String {
        let value = proxy.get(face.clone(), name).unwrap();
        match &*value {
            zbus::zvariant::Value::Str(s) => s.to_string(),
            other => format!("{other:?}"),
        }
    };
    assert_eq!(get("Mode"), "whole_machine");
    assert_eq!(get("Expert"), "cosmos");
    assert_eq!(get("Applications"), "U32(0)");

    let changes = properties_changed(&bus);
    {
        let mut st = agent.state.lock().unwrap();
        st.active = "layered".into();
        st.apps = Some(AppsStatus {
            mode: "per_application".into(),
            expert: "layered".into(),
            applications: 5,
            with_class: 4,
            pins: 1,
            ..Default::default()
        });
    }
    let t0 = Instant::now();
    let mut seen = HashMap::new();
    while !(seen.contains_key("Mode") && seen.contains_key("Applications")) {
        let left = Duration::from_secs(5).saturating_sub(t0.elapsed());
        let (name, value) = changes.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "no Mode/Applications change within 5 s: {seen:?}; asa dbus said {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        seen.insert(name, value);
    }
    assert_eq!(seen["Mode"], "per_application");
    assert_eq!(get("Mode"), "per_application");
    assert_eq!(get("Expert"), "layered");
    assert_eq!(get("Classified"), "U32(4)");
    assert_eq!(get("Pins"), "U32(1)");
    assert_eq!(get("AppModel"), "");
    assert!(server.sigterm().success());
}

/// A second server (as when scx_loader runs) is refused at start with who owns the name and
/// what to do; the first keeps it.
#[test]
fn a_second_server_is_told_who_owns_the_name() {
    let bus = PrivateBus::open();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let _agent = FakeAgent::serve(&socket, "eevdf", None);
    let first = asa_dbus(&bus, &socket, &dir.path().join("first.log"));
    let t0 = Instant::now();
    let second = ran(asa()
        .arg("--socket")
        .arg(&socket)
        .arg("dbus")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address));
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(second.code, Some(1), "{second:?}");
    let err = &second.stderr;
    assert!(err.contains("org.scx.Loader is already owned"), "{err}");
    assert!(
        err.contains(&format!("by pid {} (asa)", first.0.id())),
        "{err}"
    );
    assert!(err.contains("systemctl disable --now scx_loader"), "{err}");
    assert!(bus.name_owned());
    assert!(first.sigterm().success());
}

/// Without a bus, `asa dbus` fails at once and says which bus it tried.
#[test]
fn without_a_system_bus_asa_dbus_says_which_bus_it_tried() {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("unix:path={}", dir.path().join("no-bus").display());
    let r = ran(asa()
        .arg("--socket")
        .arg(dir.path().join("control.sock"))
        .arg("dbus")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &address));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "cannot connect to the system bus at {address} (DBUS_SYSTEM_BUS_ADDRESS)"
        )),
        "{r:?}"
    );
    assert!(r.stderr.contains("is dbus-daemon running?"), "{r:?}");
}

/// The shipped bus policy (agent/dist/org.scx.Loader.conf) on a bus with the system bus's
/// default rules: root owns the name, another user may not; anyone reads the properties
/// (`scxctl get`) and may send a switch, which the agent refuses (no polkit here) without
/// asking the agent. Needs root (the test switches user with setpriv).
#[test]
fn the_shipped_policy_lets_anyone_read_and_only_root_own_and_switch() {
    let Some(bin) = dbus_common::scxctl() else {
        return;
    };
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root (calls the bus as another user with setpriv)");
        return;
    }
    let policy = dbus_common::shipped_policy();
    let bus = PrivateBus::start(|socket| dbus_common::system_bus_config(socket, &policy));
    // Binaries another user can run: /root is not theirs to read.
    let shared = bus.dir.path();
    let scxctl_copy = shared.join("scxctl");
    std::fs::copy(&bin, &scxctl_copy).unwrap();
    let asa_copy = shared.join("asa");
    std::fs::copy(env!("CARGO_BIN_EXE_asa"), &asa_copy).unwrap();
    let nobody = 65534;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");

    // Another user may not own the name.
    let r = ran(Command::new("setpriv")
        .arg(format!("--reuid={nobody}"))
        .arg(format!("--regid={nobody}"))
        .arg("--clear-groups")
        .arg(&asa_copy)
        .arg("--socket")
        .arg(shared.join("none.sock"))
        .arg("dbus")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr
            .contains("the bus policy does not let uid 65534 own org.scx.Loader"),
        "{r:?}"
    );

    let agent = FakeAgent::serve(&socket, "bpfland", None);
    let log = dir.path().join("asa-dbus.log");
    let server = asa_dbus(&bus, &socket, &log);
    let as_nobody = |args: &[&str]| ran(&mut scxctl_cmd(&scxctl_copy, &bus, Some(nobody), args));
    let r = as_nobody(&["get"]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(r.stdout.trim(), "running Bpfland in Auto mode");
    let r = as_nobody(&["switch", "--sched", "rusty"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("AccessDenied"), "{r:?}");
    assert!(
        r.stderr.contains(
            "uid 65534 is neither root nor the agent's user, and polkit could not be asked"
        ),
        "{r:?}"
    );
    assert!(agent.requests().is_empty(), "{:?}", agent.requests());
    // The refusal is in the agent's log, with who was refused.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged
            .lines()
            .any(|l| l.contains("D-Bus SwitchScheduler from")
                && l.contains("refused")
                && l.contains("uid 65534")),
        "{logged}"
    );
    // Root switches.
    scxctl_says(
        &scxctl_copy,
        &bus,
        &["switch", "--sched", "rusty"],
        "switched to Rusty in Auto mode",
    );
    assert_eq!(agent.requests(), [pin("rusty")]);
    assert!(server.sigterm().success());
}

/// One CheckAuthorization: subject kind, subject's bus name, action id, flags.
type PolkitQuestion = (String, String, String, u32);

/// polkit's Authority as far as the agent uses it: answers CheckAuthorization with `allow`
/// and records what it was asked.
struct FakePolkit {
    allow: Arc<AtomicBool>,
    asked: Arc<Mutex<Vec<PolkitQuestion>>>,
}

#[zbus::interface(name = "org.freedesktop.PolicyKit1.Authority")]
impl FakePolkit {
    fn check_authorization(
        &self,
        subject: (String, HashMap<String, zbus::zvariant::OwnedValue>),
        action_id: String,
        _details: HashMap<String, String>,
        flags: u32,
        _cancellation_id: String,
    ) -> (bool, bool, HashMap<String, String>) {
        let name = subject
            .1
            .get("name")
            .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
            .unwrap_or_default();
        self.asked
            .lock()
            .unwrap()
            .push((subject.0, name, action_id, flags));
        let allow = self.allow.load(std::sync::atomic::Ordering::SeqCst);
        (allow, false, HashMap::new())
    }
}

/// A caller who is neither root nor the agent's user switches when polkit allows
/// scx_loader's action for it (the subject is its bus name, user interaction allowed), and is
/// refused, before the agent is asked, when polkit does not. Needs root (setpriv).
#[test]
fn polkit_decides_for_other_users_with_scx_loaders_action() {
    let Some(bin) = dbus_common::scxctl() else {
        return;
    };
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root (calls the bus as another user with setpriv)");
        return;
    }
    let bus = PrivateBus::open();
    let scxctl_copy = bus.dir.path().join("scxctl");
    std::fs::copy(&bin, &scxctl_copy).unwrap();
    let allow = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let _polkit = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.PolicyKit1")
        .unwrap()
        .serve_at(
            "/org/freedesktop/PolicyKit1/Authority",
            FakePolkit {
                allow: allow.clone(),
                asked: asked.clone(),
            },
        )
        .unwrap()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let agent = FakeAgent::serve(&socket, "bpfland", None);
    let server = asa_dbus(&bus, &socket, &dir.path().join("asa-dbus.log"));
    let as_nobody = |args: &[&str]| ran(&mut scxctl_cmd(&scxctl_copy, &bus, Some(65534), args));

    let r = as_nobody(&["switch", "--sched", "rusty"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains(
            "uid 65534 is not authorized to manage sched_ext schedulers (polkit action org.scx.loader.manage-schedulers)"
        ),
        "{r:?}"
    );
    assert!(agent.requests().is_empty());
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1, "{asked:?}");
        let (kind, name, action, flags) = &asked[0];
        assert_eq!(kind, "system-bus-name");
        assert!(name.starts_with(':'), "the caller's unique name: {name:?}");
        assert_eq!(action, "org.scx.loader.manage-schedulers");
        assert_eq!(*flags, 1, "AllowUserInteraction");
    }

    allow.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = as_nobody(&["switch", "--sched", "rusty"]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(r.stdout.trim(), "switched to Rusty in Auto mode");
    assert_eq!(agent.requests(), [pin("rusty")]);
    // Root is not asked about.
    scxctl_says(&bin, &bus, &["stop"], "stopped");
    assert_eq!(asked.lock().unwrap().len(), 2);
    assert!(server.sigterm().success());
}
