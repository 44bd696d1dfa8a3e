//! The rules of the house on this workspace, and on small trees that break each rule (so
//! the check is seen to fail).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use topoalign_architecture::{Violation, read_workspace, violations};

#[test]
fn the_workspace_keeps_the_rules_of_the_house() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ws = read_workspace(&root).unwrap();
    assert!(ws.crates.len() > 20, "{} crates", ws.crates.len());
    let v = violations(&ws);
    let text: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert!(
        v.is_empty(),
        "{} broken rules:\n{}",
        v.len(),
        text.join("\n")
    );
}

/// A crate of `files` (path under src/, text) in a temporary directory.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join("src").join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn check(files: &[(&str, &str)], deps: &[&str], name: &str) -> Vec<Violation> {
    let dir = tree(files);
    let deps = deps.iter().map(|d| d.to_string()).collect();
    let c = topoalign_architecture::read_crate(name, &dir.path().join("src"), deps).unwrap();
    violations(&topoalign_architecture::Workspace { crates: vec![c] })
}

#[test]
fn an_import_circle_is_found_through_re_exports() {
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\npub use b::Thing;\n"),
        (
            "a.rs",
            "use crate::Thing;\npub(crate) fn f() -> Thing { Thing }\n",
        ),
        ("b.rs", "pub struct Thing;\nuse super::a::f;\n"),
        (
            "c.rs",
            "use crate::b::Thing;\n#[cfg(test)]\nmod tests { use crate::a::f; }\n",
        ),
    ];
    let v = check(&files, &[], "x");
    assert_eq!(
        v,
        [Violation::Circle {
            krate: "x".into(),
            modules: vec!["a".into(), "b".into()],
            arrows: vec![("a".into(), "b".into()), ("b".into(), "a".into())],
        }]
    );
    assert!(v[0].to_string().contains("a -> b, b -> a"), "{}", v[0]);
    // The same without b's import: no circle (c's test module draws no arrow).
    let mut fixed = files;
    fixed[2] = ("b.rs", "pub struct Thing;\n");
    assert!(check(&fixed, &[], "x").is_empty());
}

#[test]
fn nested_modules_and_path_attributes_are_followed() {
    let files = [
        ("lib.rs", "mod outer;\n"),
        (
            "outer/mod.rs",
            "mod inner;\n#[path = \"side.rs\"]\nmod side;\nuse self::inner::X;\n",
        ),
        (
            "outer/inner.rs",
            "pub struct X;\nuse crate::outer::side::Y;\n",
        ),
        ("outer/side.rs", "pub struct Y;\nuse super::inner::X;\n"),
    ];
    let v = check(&files, &[], "x");
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].to_string().contains("outer::inner, outer::side"),
        "{}",
        v[0]
    );
}

#[test]
fn edge_crates_and_undocumented_public_modules_are_refused() {
    let files = [(
        "lib.rs",
        "pub mod open;\n/// A namespace of constants.\npub mod said;\n",
    )];
    let dir = tree(&[("open.rs", ""), ("said.rs", "")]);
    for (p, t) in &files {
        std::fs::write(dir.path().join("src").join(p), t).unwrap();
    }
    let c = topoalign_architecture::read_crate(
        "topoalign-agent",
        &dir.path().join("src"),
        vec!["topoalign-driver".into(), "topoalign-dra".into()],
    )
    .unwrap();
    let v = violations(&topoalign_architecture::Workspace { crates: vec![c] });
    let text: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert_eq!(v.len(), 2, "{text:?}");
    assert!(
        text[0].starts_with("topoalign-agent depends on topoalign-driver"),
        "{}",
        text[0]
    );
    assert!(text[1].contains("`pub mod open`"), "{}", text[1]);
}

#[test]
fn an_unreadable_tree_is_an_error_naming_the_file() {
    let dir = tree(&[("lib.rs", "mod gone;\n")]);
    let e = topoalign_architecture::read_crate("x", &dir.path().join("src"), vec![]).unwrap_err();
    assert!(e.to_string().contains("gone"), "{e}");
    let dir = tree(&[("lib.rs", "fn (\n")]);
    let e = topoalign_architecture::read_crate("x", &dir.path().join("src"), vec![]).unwrap_err();
    assert!(e.to_string().starts_with("parsing "), "{e}");
}
