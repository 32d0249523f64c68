//! The control lock, tested in its own binary: a unit-test binary runs tests on threads that
//! fork children (the attach gate's `pre_exec`), and a child forked while the lock's file is
//! open shares its open file description until it execs, so the lock could outlive the drop
//! below by that window. No thread forks here.

use asa_experts::control_lock::ControlLock;

#[test]
fn a_second_holder_is_refused_with_the_owner_pid_until_the_first_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/supervisor.lock");
    let first = ControlLock::acquire(&path).unwrap();
    let content = std::fs::read_to_string(first.path()).unwrap();
    assert_eq!(content.trim(), std::process::id().to_string());
    // flock locks belong to the open file description: a second open in the same process
    // conflicts like another process would.
    let err = ControlLock::acquire(&path).unwrap_err().to_string();
    assert!(
        err.contains(&format!("pid {}", std::process::id())) && err.contains("asa pin"),
        "{err}"
    );
    drop(first);
    ControlLock::acquire(&path).unwrap();
}
