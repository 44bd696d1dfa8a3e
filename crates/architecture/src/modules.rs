//! A crate's module tree from its root file, following `mod x;` declarations (`x.rs`,
//! `x/mod.rs` or a `#[path]`), and the arrows its `use` items draw between modules.
//!
//! A `use` path is resolved module by module: through a child module, through a name a
//! module re-exports (`pub use a::Thing` hands `Thing` on, so `crate::Thing` arrives at
//! `a`), else it stops at the module that defines the item. Re-exports themselves draw no
//! arrow (they are a module's face, not its needs), nor do `#[cfg(test)]` modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::{Attribute, Item, UseTree, Visibility};

use crate::ArchError;

/// One module of the tree: a file, or a module written inline in one.
#[derive(Debug, Default)]
pub(crate) struct Module {
    /// The file that holds it.
    pub file: PathBuf,
    /// Child modules by name.
    children: BTreeSet<String>,
    /// Names handed on: name -> the path it refers to (absolute, from the crate root).
    reexports: BTreeMap<String, Vec<String>>,
    /// Glob re-exports (`pub use a::*`), absolute.
    globs: Vec<Vec<String>>,
    /// The absolute paths its own `use` items name.
    uses: Vec<Vec<String>>,
    /// `pub mod` items without a doc comment.
    pub undocumented_pub_mods: Vec<String>,
}

/// A crate's modules by path (`""` the root, `a::b`).
pub(crate) type Tree = BTreeMap<String, Module>;

fn join(path: &[String]) -> String {
    path.join("::")
}

fn split(path: &str) -> Vec<String> {
    if path.is_empty() {
        Vec::new()
    } else {
        path.split("::").map(str::to_string).collect()
    }
}

fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn has_doc(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("doc"))
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.path().is_ident("path"))
        .and_then(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
}

/// The paths of an item's code that start at `crate`, `self` or `super`, leaving out its
/// `#[cfg(test)]` inner modules.
#[derive(Default)]
struct CodePaths(Vec<Vec<String>>);

impl<'ast> syn::visit::Visit<'ast> for CodePaths {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segs.first().map(String::as_str),
            Some("crate" | "self" | "super")
        ) && segs.len() > 1
        {
            self.0.push(segs);
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

/// Every path of a use tree, as written (`crate::a::{b, c::D}` gives `crate::a::b` and
/// `crate::a::c::D`); a glob ends in `*`.
fn use_paths(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let mut v = prefix.clone();
            v.push(n.ident.to_string());
            out.push(v);
        }
        UseTree::Rename(r) => {
            let mut v = prefix.clone();
            v.push(r.ident.to_string());
            v.push(format!("as {}", r.rename));
            out.push(v);
        }
        UseTree::Glob(_) => {
            let mut v = prefix.clone();
            v.push("*".into());
            out.push(v);
        }
        UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// A path relative to module `at` made absolute (from the crate root); `None` for a path
/// into another crate.
fn absolute(path: &[String], at: &[String]) -> Option<Vec<String>> {
    let (head, rest) = path.split_first()?;
    match head.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some(at.iter().cloned().chain(rest.iter().cloned()).collect()),
        "super" => {
            let mut base = at.to_vec();
            base.pop();
            let mut rest = rest.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest.remove(0);
            }
            Some(base.into_iter().chain(rest).collect())
        }
        _ => None,
    }
}

/// Reads the module `at` from `items` (a file's or an inline module's), recursing into its
/// children; `dir` is where its child files live.
fn read_items(
    items: &[Item],
    at: &[String],
    file: &Path,
    dir: &Path,
    tree: &mut Tree,
) -> Result<(), ArchError> {
    let mut m = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    for item in items {
        match item {
            Item::Mod(md) if is_test(&md.attrs) => {}
            Item::Mod(md) => {
                let name = md.ident.to_string();
                m.children.insert(name.clone());
                if matches!(md.vis, Visibility::Public(_)) && !has_doc(&md.attrs) {
                    m.undocumented_pub_mods.push(name.clone());
                }
                let mut child = at.to_vec();
                child.push(name.clone());
                match &md.content {
                    Some((_, inner)) => read_items(inner, &child, file, &dir.join(&name), tree)?,
                    None => {
                        // A `#[path]` is relative to the directory of the file that
                        // declares the module (the Rust reference, Modules).
                        let path = match path_attr(&md.attrs) {
                            Some(p) => file.parent().unwrap_or(Path::new(".")).join(p),
                            None if dir.join(format!("{name}.rs")).exists() => {
                                dir.join(format!("{name}.rs"))
                            }
                            None => dir.join(&name).join("mod.rs"),
                        };
                        read_file(&path, &child, tree)?;
                    }
                }
            }
            Item::Use(u) => {
                let mut paths = Vec::new();
                use_paths(&u.tree, &mut Vec::new(), &mut paths);
                let handed_on = !matches!(u.vis, Visibility::Inherited);
                for p in paths {
                    let rename = p
                        .last()
                        .and_then(|l| l.strip_prefix("as "))
                        .map(str::to_string);
                    let p: Vec<String> = p.into_iter().filter(|s| !s.starts_with("as ")).collect();
                    let Some(abs) = absolute(&p, at).or_else(|| {
                        // a path through a child module written without `self::`
                        m.children
                            .contains(&p[0])
                            .then(|| at.iter().chain(&p).cloned().collect())
                    }) else {
                        continue;
                    };
                    if handed_on {
                        match abs.last().map(String::as_str) {
                            Some("*") => m.globs.push(abs[..abs.len() - 1].to_vec()),
                            Some(name) => {
                                let key = rename.clone().unwrap_or_else(|| name.to_string());
                                m.reexports.insert(key, abs.clone());
                            }
                            None => {}
                        }
                    } else {
                        m.uses.push(abs);
                    }
                }
            }
            other => {
                // Paths written out in the code (`crate::a::f()`, `super::X` in a type)
                // need their module as much as a `use` does.
                let mut paths = CodePaths::default();
                syn::visit::visit_item(&mut paths, other);
                m.uses
                    .extend(paths.0.iter().filter_map(|p| absolute(p, at)));
            }
        }
    }
    tree.insert(join(at), m);
    Ok(())
}

/// Reads the file of module `at` and its children.
pub(crate) fn read_file(path: &Path, at: &[String], tree: &mut Tree) -> Result<(), ArchError> {
    let text = std::fs::read_to_string(path).map_err(|source| ArchError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file = syn::parse_file(&text).map_err(|source| ArchError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    // The root and a `mod.rs` keep their children beside them; `a.rs` keeps them in `a/`.
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let parent = path.parent().unwrap_or(Path::new("."));
    let dir = if at.is_empty() || stem == "mod" {
        parent.to_path_buf()
    } else {
        parent.join(stem)
    };
    read_items(&file.items, at, path, &dir, tree)
}

/// Where an absolute path lands: the module that defines its last name, following
/// children and re-exports (at most 16 hops through re-exports).
fn resolve(tree: &Tree, path: &[String]) -> String {
    let mut at: Vec<String> = Vec::new();
    let mut rest: Vec<String> = path.to_vec();
    let mut hops = 0;
    while let Some(head) = rest.first().cloned() {
        let Some(m) = tree.get(&join(&at)) else { break };
        if m.children.contains(&head) {
            at.push(head);
            rest.remove(0);
        } else if let Some(target) = m.reexports.get(&head).filter(|_| hops < 16) {
            hops += 1;
            let mut next = target.clone();
            next.extend(rest.drain(1..));
            at.clear();
            rest = next;
        } else if let Some(g) = m.globs.first().filter(|_| hops < 16) {
            hops += 1;
            let mut next = g.clone();
            next.append(&mut rest);
            at.clear();
            rest = next;
        } else {
            break;
        }
    }
    join(&at)
}

/// The arrows between the modules of a tree (`from -> to`, `from != to`), each once. An
/// arrow into one's own descendant is left out: a module holds its children.
pub(crate) fn arrows(tree: &Tree) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (name, m) in tree {
        for u in &m.uses {
            let to = resolve(tree, u);
            let inside = to.starts_with(&format!("{name}::")) || name.is_empty();
            if to != *name && !inside && tree.contains_key(&to) {
                out.insert((name.clone(), to));
            }
        }
    }
    out
}

/// The crate's `pub mod` items without a doc comment: (file, module name).
pub(crate) fn undocumented(tree: &Tree) -> Vec<(PathBuf, String)> {
    tree.values()
        .flat_map(|m| {
            m.undocumented_pub_mods
                .iter()
                .map(|n| (m.file.clone(), n.clone()))
        })
        .collect()
}

/// A module path as a file would show it (`a::b`, or `(root)`).
pub(crate) fn label(path: &str) -> String {
    if path.is_empty() {
        "(root)".into()
    } else {
        split(path).join("::")
    }
}
