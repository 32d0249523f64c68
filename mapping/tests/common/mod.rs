//! Shared by the calibration tests: a scenario catalogue with two cheap single-phase scenarios.

use asa_scenarios::catalogue::BUILTIN_SCENARIOS;

/// The built-in catalogue with a small xz corpus and two single-phase scenarios against it
/// (`CAL-GAME`: game probe, `CAL-AUDIO`: audio probe; classes `game+xz_compress` and
/// `audio+xz_compress`). xz-utils has Debian priority "required", so every rootfs has it.
pub fn calibration_catalogue_text() -> String {
    let mut text = BUILTIN_SCENARIOS.replace(
        "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 8 }]\ncommand = [\"xz\"",
        "prepare = [{ kind = \"text_corpus\", file = \"corpus.txt\", megabytes = 1 }]\ncommand = [\"xz\"",
    );
    assert!(text.contains("megabytes = 1 }"), "the xz load changed");
    text.push_str(
        r#"
[[scenario]]
name = "CAL-GAME"
title = "Game Play & xz Compression (calibration test)"
probe = "game"
load = "xz_compress"

[[scenario]]
name = "CAL-AUDIO"
title = "Audio & xz Compression (calibration test)"
probe = "audio"
load = "xz_compress"
"#,
    );
    text
}
