//! Issue 32, point 7: the fault-injection suite in the lab VM. faults_common holds what its
//! guest records, the checks every row must pass and the table the test prints, tested on the
//! host with a fixture of guest records.

mod faults_common;
