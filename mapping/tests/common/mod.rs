//! Shared by the calibration tests: a scenario catalogue with two cheap single-phase scenarios.

/// The built-in catalogue with a small xz corpus and two single-phase scenarios against it
/// (`CAL-GAME`: game probe, `CAL-AUDIO`: audio probe; classes `game+xz_compress` and
/// `audio+xz_compress`): `asa_scenarios::catalogue::calibration_test_catalogue`.
pub fn calibration_catalogue_text() -> String {
    asa_scenarios::catalogue::calibration_test_catalogue()
}
