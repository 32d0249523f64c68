//! Calibration of the mapping table (ASA paper §4.3): stage 1 ranks experts per class from
//! scenario scores ([`calibrate`]; with a time budget, [`budget`] spends the runs where a
//! class's ranking is still open), stage 2 measures what a switch costs ([`overhead`]), stage 3
//! runs the real agent against the static experts ([`live`]); stage layers writes the table's
//! per-application layer rows ([`layers`]); [`retrain`] trains the load classifier on this
//! machine's recorded ticks (`--retrain`); [`cli`] is `asa calibrate` and
//! `asa mapping`. The table itself (format, checks) is the `asa-mapping-table` crate,
//! re-exported here.

pub use asa_mapping_table::*;

pub mod budget;
pub mod calibrate;
pub mod cli;
pub mod layers;
pub mod live;
pub mod overhead;
pub mod retrain;

/// The fingerprint of the machine a scenario result set was measured on, with the versions of
/// the catalogue's experts (`eevdf` is the kernel itself; our own experts carry the workspace
/// version).
pub fn machine_fingerprint(
    machine: &asa_scenarios::runner::MachineInfo,
    experts: &asa_experts::Catalogue,
) -> MachineFingerprint {
    let expert_versions = experts
        .experts()
        .iter()
        .filter(|e| !e.is_kernel_default())
        .map(|e| {
            let version = e
                .version
                .clone()
                .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
            (e.name.clone(), version)
        })
        .collect();
    MachineFingerprint {
        cpu_model: machine.cpu_model.clone(),
        cores: machine.cpus as u32,
        smt: machine.smt,
        memory_mib: machine.memory_mib,
        kernel_release: machine.kernel.clone(),
        expert_versions,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The default table covers exactly the lab's workload classes (every background load of the
    /// scenario catalogue, `idle` included: the default classifier's class set) with experts of
    /// the built-in catalogue.
    #[test]
    fn default_table_matches_the_scenario_catalogue_and_experts() {
        let scenarios = asa_scenarios::catalogue::Catalogue::builtin().unwrap();
        let mut classes = BTreeSet::new();
        for scenario in &scenarios.scenarios {
            for phase in scenario.phases() {
                classes.insert(phase.load.clone());
            }
        }
        assert!(
            classes.contains("idle") && classes.len() >= 10,
            "{classes:?}"
        );
        let classes: Vec<&str> = classes.iter().map(String::as_str).collect();
        let table = MappingTable::builtin_default().unwrap();
        assert_eq!(table.source, "hand-written");
        assert!(DEFAULT_TABLE.contains("hand-written until calibration"));
        let unmapped = table.validate_builtin_experts("default", &classes).unwrap();
        assert!(unmapped.is_empty(), "unmapped lab classes: {unmapped:?}");
        assert_eq!(table.classes.len(), classes.len());
        assert!(table
            .classes
            .iter()
            .all(|c| c.ranked.iter().all(|r| r.runs == 0)));
    }

    #[test]
    fn the_per_application_table_sends_every_load_to_layered() {
        let scenarios = asa_scenarios::catalogue::Catalogue::builtin().unwrap();
        let classes: BTreeSet<String> = scenarios
            .scenarios
            .iter()
            .flat_map(|s| s.phases().into_iter().map(|p| p.load.clone()))
            .collect();
        let classes: Vec<&str> = classes.iter().map(String::as_str).collect();
        let text = include_str!("../tables/per-application.toml");
        let table = MappingTable::parse(text, "tables/per-application.toml").unwrap();
        let unmapped = table
            .validate_builtin_experts("per-application", &classes)
            .unwrap();
        assert!(unmapped.is_empty(), "unmapped lab classes: {unmapped:?}");
        assert_eq!(table.default_expert(), Some("layered".to_string()));
        assert!(table
            .classes
            .iter()
            .all(|c| c.ranked.len() == 1 && c.ranked[0].expert == "layered"));
    }
}
