//! The Rust voter reproduces the Python voter (classifier/asa_classifier/voting.py) on the shared
//! vectors in tests/data/voting_vectors.json (written by asa_classifier.make_test_model).

use asa_agent::decision::voting::{TimeWeightedVoter, VotingConfig};
use serde::Deserialize;

#[derive(Deserialize)]
struct Vectors {
    schema: String,
    version: u32,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    window: usize,
    threshold: f64,
    decay: f64,
    classes: usize,
    probabilities: Vec<Vec<f32>>,
    votes: Vec<Option<usize>>,
    scores: Vec<Vec<f64>>,
    margins: Vec<f64>,
    supports: Vec<f64>,
}

#[test]
fn rust_voter_matches_python_vectors() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/voting_vectors.json"
    );
    let vectors: Vectors = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        (vectors.schema.as_str(), vectors.version),
        ("asa.voting-vectors", 1)
    );
    assert!(vectors.cases.len() >= 9);
    let mut ticks = 0;
    for (i, case) in vectors.cases.iter().enumerate() {
        let config = VotingConfig {
            window: case.window,
            threshold: case.threshold,
            decay: case.decay,
        };
        let mut voter = TimeWeightedVoter::new(config, case.classes).unwrap();
        for (t, probabilities) in case.probabilities.iter().enumerate() {
            let vote = voter.push(probabilities).unwrap();
            assert_eq!(vote.class, case.votes[t], "case {i} tick {t}");
            for (a, b) in vote.scores.iter().zip(&case.scores[t]) {
                assert!(
                    (a - b).abs() < 1e-9,
                    "case {i} tick {t}: {:?} vs {:?}",
                    vote.scores,
                    case.scores[t]
                );
            }
            assert!(
                (vote.margin - case.margins[t]).abs() < 1e-9,
                "case {i} tick {t} margin"
            );
            assert!(
                (vote.support - case.supports[t]).abs() < 1e-9,
                "case {i} tick {t} support"
            );
            ticks += 1;
        }
    }
    assert!(ticks > 50);
}
