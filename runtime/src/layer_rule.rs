//! The import rule of docs/layers.md, checked over the library's own
//! sources: api → ops → engine → sys, never upward, no operation importing
//! another, and below `api` no name from above but the error type.

use std::path::{Path, PathBuf};

const LAYERS: [&str; 4] = ["api", "ops", "engine", "sys"];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == layer)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each `crate::<first>::<second>` path in `text`.
fn crate_paths(text: &str) -> Vec<(String, String)> {
    text.match_indices("crate::")
        .map(|(at, m)| {
            let mut names =
                text[at + m.len()..].split("::").map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>());
            (names.next().unwrap_or_default(), names.next().unwrap_or_default())
        })
        .collect()
}

/// What a file of `layer` (module `own` when an operation) may not name.
fn violation(layer: &str, own: &str, first: &str, second: &str) -> Option<String> {
    let Some(target) = rank(first) else {
        return (first != "error" && layer != "api").then(|| format!("crate::{first} is neither a layer nor the error type"));
    };
    let from = rank(layer).expect("a layer");
    if target < from {
        return Some(format!("{layer} imports {first}, a layer above it"));
    }
    (layer == "ops" && first == "ops" && second != own).then(|| format!("operation {own} imports operation {second}"))
}

#[test]
fn imports_go_only_downward_and_no_operation_imports_another() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for layer in LAYERS {
        let mut files = Vec::new();
        sources(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "no sources in {layer}/");
        for file in files {
            let own = file.file_stem().unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(&file).unwrap();
            for (first, second) in crate_paths(&text) {
                if let Some(why) = violation(layer, &own, &first, &second) {
                    broken.push(format!("{}: {why}", file.strip_prefix(&src).unwrap().display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "layer rule broken (docs/layers.md):\n{}", broken.join("\n"));
}

#[test]
fn the_rule_catches_what_it_forbids() {
    assert!(violation("engine", "stop", "ops", "start").is_some());
    assert!(violation("sys", "in_root", "engine", "mount").is_some());
    assert!(violation("ops", "run", "ops", "create").is_some());
    assert!(violation("ops", "kill", "api", "Container").is_some());
    assert!(violation("engine", "stop", "Result", "").is_some());
    assert!(violation("ops", "run", "ops", "run").is_none());
    assert!(violation("engine", "stop", "error", "Error").is_none());
    assert!(violation("api", "runtime", "ops", "run").is_none());
    assert_eq!(crate_paths("use crate::ops::create::{self};"), vec![("ops".into(), "create".into())]);
}
