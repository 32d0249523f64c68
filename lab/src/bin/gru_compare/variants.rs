//! The schedulers the bench can start, and scx_gru's variants as data: name → scx_gru options.
//!
//! `eevdf` (the kernel's own, the baseline), `gru` (scx_gru with the committed model and its
//! defaults, as `asa pin gru` runs it), `bpfland` (scx_bpfland) and `floor` (scx_floor, this
//! crate's control: the kernel's idle-CPU selection and one global FIFO, so what a load loses
//! under it is sched_ext's own cost). A variant `gru-NAME` is scx_gru with [`VARIANTS`]'s options
//! for NAME; a numbered one (`gru-burst40`) passes its number to the option. Variants combine
//! with `+`: `gru-wakebal2+burst8` is `--wake-balance 2 --burst-cap-ms 8`. `scx_gru --help`
//! gives each option's default.
//!
//! The guest script's `gru_flags` is generated from [`VARIANTS`] ([`shell_cases`]), so the
//! check here and the guest agree.

/// The schedulers that are not scx_gru variants.
pub const BASE_SCHEDULERS: [&str; 4] = ["eevdf", "gru", "bpfland", "floor"];

/// scx_gru's options for one variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Options {
    /// `gru-NAME`: these options.
    Fixed(&'static str),
    /// `gru-NAMEN` (N a number): this option with N.
    Numbered(&'static str),
}

/// One scx_gru variant: `gru-` + `name` (+ a number if [`Options::Numbered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub name: &'static str,
    pub options: Options,
    /// What it changes.
    pub what: &'static str,
}

const fn fixed(name: &'static str, options: &'static str, what: &'static str) -> Variant {
    Variant {
        name,
        options: Options::Fixed(options),
        what,
    }
}

const fn numbered(name: &'static str, option: &'static str, what: &'static str) -> Variant {
    Variant {
        name,
        options: Options::Numbered(option),
        what,
    }
}

/// Every scx_gru variant, in the order of the guest script's `case`.
pub const VARIANTS: [Variant; 25] = [
    fixed("batch1", "--max-batch 1", "one model run per task"),
    fixed(
        "bpfmodel",
        "--bpf-model /usr/local/share/scx_gru/mlp.json",
        "the in-BPF MLP places waking tasks in select_cpu; no user-space GRU (issue 42)",
    ),
    fixed(
        "burst",
        "--burst-cap-ms 5",
        "the shared DSQ ordered by vtime + the vtime used since the last wake-up, capped at 5 ms",
    ),
    fixed(
        "vtime",
        "--burst-cap-ms 0",
        "the shared DSQ ordered by vtime alone",
    ),
    numbered(
        "burst",
        "--burst-cap-ms",
        "the burst cap at N ms (gru-burst40: scx_bpfland's slice lag)",
    ),
    fixed(
        "noinfer",
        "--inference-budget-pct 0",
        "the model loaded and the event path running, but no inference: the event path's cost",
    ),
    fixed(
        "observe",
        "--observe-only",
        "the model runs, its predictions looked up, every placement the fallback's",
    ),
    fixed(
        "nogate",
        "--min-followed-pct 0",
        "inference never pauses when its predictions' CPUs are busy",
    ),
    fixed(
        "userfirst",
        "--usersched-always-first",
        "scx_gru's own thread stays first on its CPU after its slice too",
    ),
    fixed(
        "busykeep",
        "--busy-pause-keeps-events",
        "a busy pause keeps the events",
    ),
    fixed("fallback", "--no-model", "the fallback policy alone"),
    fixed(
        "preempt",
        "--preempt-min-run-us 1000",
        "wakeup preemption by the deadline rule after 1 ms of run",
    ),
    numbered(
        "preempt",
        "--preempt-min-run-us",
        "wakeup preemption after N µs of run (gru-preempt0: at once)",
    ),
    numbered(
        "affinity",
        "--dispatch-affinity-us",
        "a CPU takes a task that last ran on it ahead of the shared DSQ's head within N µs of vtime",
    ),
    numbered(
        "budget",
        "--inference-budget-pct",
        "the model may use N % of a CPU",
    ),
    numbered(
        "moved",
        "--min-moved-pct",
        "inference pauses while under N % of usable predictions move a task",
    ),
    fixed("nopreempt", "--no-wakeup-preempt", "no wakeup preemption"),
    fixed(
        "nopinned",
        "--no-pinned-preempt",
        "waking single-CPU tasks (per-CPU kernel threads) wait for the running task's slice",
    ),
    numbered(
        "kthread",
        "--kthread-preempt-us",
        "a waking kernel thread preempts a CPU hog once the hog has run N µs",
    ),
    fixed(
        "nodefer",
        "--deferred-preempt-us 0",
        "a wake-up that would preempt a CPU hog but for the minimum run waits for the slice",
    ),
    fixed(
        "nowake",
        "--no-wake-queues",
        "every waiting task in the shared DSQ instead of its CPU's wake queue",
    ),
    numbered(
        "wakebal",
        "--wake-balance",
        "a wake-up waits in another CPU's wake queue when its own CPU's holds N more tasks",
    ),
    numbered(
        "defer",
        "--deferred-preempt-us",
        "the CPU's timer preempts a hog once it has run N µs",
    ),
    fixed("fixed", "--slice-min-us 0", "the fixed 5 ms slice"),
    fixed(
        "slice",
        "--slice-min-us 500",
        "the slice shrinks with the shared DSQ's queue",
    ),
];

/// Whether `part` (one `+`-separated part after `gru-`) names a variant.
fn known_part(part: &str) -> bool {
    VARIANTS.iter().any(|v| match v.options {
        Options::Fixed(_) => part == v.name,
        Options::Numbered(_) => part
            .strip_prefix(v.name)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
    })
}

/// Whether the guest script can start `name`: one of [`BASE_SCHEDULERS`] or `gru-` and
/// variants joined by `+`.
pub fn known_scheduler(name: &str) -> bool {
    BASE_SCHEDULERS.contains(&name)
        || name
            .strip_prefix("gru-")
            .is_some_and(|parts| parts.split('+').all(known_part))
}

/// The names `--schedulers` accepts, for an error message (`N` a number).
pub fn known_names() -> String {
    let variants = VARIANTS.iter().map(|v| match v.options {
        Options::Fixed(_) => format!("gru-{}", v.name),
        Options::Numbered(_) => format!("gru-{}N", v.name),
    });
    BASE_SCHEDULERS
        .iter()
        .map(|s| s.to_string())
        .chain(variants)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--help`'s list of the scheduler names: every variant with its options and what it changes.
pub fn help() -> String {
    let mut out = String::from(
        "Schedulers: eevdf (the baseline), gru (scx_gru, the committed model), bpfland\n\
         (scx_bpfland), floor (scx_floor: sched_ext's own cost), and scx_gru's variants below,\n\
         which combine with + (gru-wakebal2+burst8 is --wake-balance 2 --burst-cap-ms 8):\n",
    );
    for v in VARIANTS {
        let (name, options) = match v.options {
            Options::Fixed(options) => (format!("gru-{}", v.name), options.to_owned()),
            Options::Numbered(option) => (format!("gru-{}N", v.name), format!("{option} N")),
        };
        out.push_str(&format!("  {name}: {options}\n      {}\n", v.what));
    }
    out
}

/// The guest script's `case` lines of `gru_flags VARIANT`, which echo a variant's options.
pub fn shell_cases() -> String {
    VARIANTS
        .iter()
        .map(|v| match v.options {
            Options::Fixed(options) => format!("    gru-{}) echo {options} ;;\n", v.name),
            Options::Numbered(option) => {
                format!(
                    "    gru-{0}[0-9]*) echo {option} ${{1#gru-{0}}} ;;\n",
                    v.name
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_variants_take_any_number_and_parts_combine_with_plus() {
        for ok in [
            "eevdf",
            "gru",
            "bpfland",
            "floor",
            "gru-preempt",
            "gru-preempt0",
            "gru-preempt120",
            "gru-affinity1000",
            "gru-budget2",
            "gru-burst40",
            "gru-wakebal2+burst8",
            "gru-wakebal2+burst+nowake",
        ] {
            assert!(known_scheduler(ok), "{ok}");
        }
        for bad in [
            "gru-preempt-5",
            "gru-preempt1x",
            "gru-preemptx",
            "gru-affinity",
            "gru-",
            "cfs",
            "gru-wakebal2+",
            "gru-+burst8",
            "gru-wakebal2+cfs",
            "gru-wakebal2+gru-burst8",
            "gru-eevdf",
            "eevdf+gru",
        ] {
            assert!(!known_scheduler(bad), "{bad}");
        }
    }

    #[test]
    fn every_variant_has_one_case_line_in_table_order() {
        let cases = shell_cases();
        assert_eq!(cases.lines().count(), VARIANTS.len());
        assert!(cases.starts_with("    gru-batch1) echo --max-batch 1 ;;\n"));
        assert!(cases
            .contains("    gru-preempt[0-9]*) echo --preempt-min-run-us ${1#gru-preempt} ;;\n"));
        // A fixed name comes before the numbered one with the same prefix.
        let at = |line: &str| cases.find(line).unwrap();
        assert!(at("    gru-burst) ") < at("    gru-burst[0-9]*) "));
    }

    #[test]
    fn the_help_lists_every_variant_with_its_options() {
        let help = help();
        assert_eq!(help.lines().count(), 3 + 2 * VARIANTS.len());
        assert!(
            help.contains("\n  gru-fallback: --no-model\n      the fallback policy alone\n"),
            "{help}"
        );
        assert!(
            help.contains("\n  gru-burstN: --burst-cap-ms N\n"),
            "{help}"
        );
        // Short enough that clap does not wrap them.
        assert!(help.lines().all(|l| l.chars().count() <= 96), "{help}");
    }

    #[test]
    fn the_error_message_lists_numbered_variants_with_n() {
        let names = known_names();
        assert!(names.starts_with("eevdf, gru, bpfland, floor, gru-batch1"));
        assert!(names.contains("gru-burstN") && names.contains("gru-wakebalN"));
    }
}
