//! The crate's modules depend on each other without a cycle (issue 38): every
//! `crate::` path of a module's code (its `use crate::...` lines and the paths written
//! inline) names a module, directly or through a re-export of lib.rs, and the graph of
//! those edges is a DAG. Read from src/ as text; comments, strings and char literals
//! are skipped, so a doc link like [`Status`](crate::Status) is no dependency.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The source with comments, string and char literals removed (strings become `""`), so
/// that only code remains. Lifetimes (`'a`) are kept.
fn code_only(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i == 1 || !ident(s[i - 2]))))
            && matches!(next, Some('"') | Some('#'))
            && s[i + 1..].iter().find(|&&h| h != '#') == Some(&'"')
        {
            // r"...", r#"..."#, br"...": ends at a quote followed by as many #.
            let hashes = s[i + 1..].iter().take_while(|&&h| h == '#').count();
            i += 2 + hashes;
            while i < s.len() && !(s[i] == '"' && s[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes) {
                i += 1;
            }
            i += 1 + hashes;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // '\n', '\'', '\u{..}'
            i += 2;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && s.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_at(s: &[char], mut i: usize) -> (String, usize) {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    let start = i;
    while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
        i += 1;
    }
    (s[start..i].iter().collect(), i)
}

/// The first segments after each `crate::` of the code: `crate::a::b` gives a,
/// `crate::{a, b::c, d as e}` gives a, b and d.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let s: Vec<char> = code.chars().collect();
    let pattern: Vec<char> = "crate::".chars().collect();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i + pattern.len() <= s.len() {
        let starts_word = i == 0 || !(s[i - 1].is_alphanumeric() || s[i - 1] == '_' || s[i - 1] == '$');
        if !(starts_word && s[i..i + pattern.len()] == pattern[..]) {
            i += 1;
            continue;
        }
        i += pattern.len();
        while i < s.len() && s[i].is_whitespace() {
            i += 1;
        }
        if s.get(i) == Some(&'{') {
            let mut depth = 0;
            let mut item_start = true;
            while i < s.len() {
                match s[i] {
                    '{' => {
                        depth += 1;
                        item_start = depth == 1;
                        i += 1;
                    }
                    '}' => {
                        depth -= 1;
                        i += 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        item_start = true;
                        i += 1;
                    }
                    c if item_start && !c.is_whitespace() => {
                        let (name, end) = ident_at(&s, i);
                        if !name.is_empty() {
                            found.insert(name);
                        }
                        item_start = false;
                        i = end.max(i + 1);
                    }
                    _ => i += 1,
                }
            }
        } else {
            let (name, end) = ident_at(&s, i);
            if !name.is_empty() {
                found.insert(name);
            }
            i = end;
        }
    }
    found
}

/// lib.rs's modules, and the module each name it re-exports (`pub use m::{A, b}`) comes
/// from.
fn crate_root(lib_rs: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let code = code_only(lib_rs);
    let mut modules = BTreeSet::new();
    let mut exports = BTreeMap::new();
    for statement in code.split(';') {
        let words: Vec<&str> = statement.split_whitespace().collect();
        if let Some(at) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(at + 1) {
                modules.insert(name.to_string());
            }
        }
        if let Some(at) = words.iter().position(|w| *w == "use") {
            let path = words[at + 1..].join(" ");
            let Some((module, rest)) = path.split_once("::") else { continue };
            let items = rest.trim().trim_start_matches('{').trim_end_matches('}');
            for item in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                // "A", "a::B", "c as D": the name the crate root gets.
                let name = item.split_whitespace().last().unwrap_or(item);
                let name = name.rsplit("::").next().unwrap_or(name);
                exports.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    (modules, exports)
}

/// {module: the modules its code names through `crate::`}, from lib.rs and
/// {module: source}. Panics on a `crate::` name it cannot place.
fn module_graph(lib_rs: &str, sources: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let (modules, exports) = crate_root(lib_rs);
    let mut graph = BTreeMap::new();
    for (module, source) in sources {
        let mut deps = BTreeSet::new();
        for name in crate_paths(&code_only(source)) {
            let target = if modules.contains(&name) {
                name.clone()
            } else if let Some(m) = exports.get(&name) {
                m.clone()
            } else {
                panic!("{module}.rs names crate::{name}, neither a module nor a re-export of lib.rs");
            };
            if &target != module {
                deps.insert(target);
            }
        }
        graph.insert(module.clone(), deps);
    }
    graph
}

/// One cycle ([a, b, a]), or None.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        path.push(module.to_string());
        for dep in graph.get(module).into_iter().flatten() {
            if let Some(at) = path.iter().position(|m| m == dep) {
                let mut cycle = path[at..].to_vec();
                cycle.push(dep.clone());
                return Some(cycle);
            }
            if !done.contains(dep) {
                if let Some(cycle) = visit(dep, graph, done, path) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if !done.contains(module) {
            if let Some(cycle) = visit(module, graph, &mut done, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

#[test]
fn the_modules_name_each_other_without_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib_rs = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let (modules, _) = crate_root(&lib_rs);
    let sources: BTreeMap<String, String> = modules
        .iter()
        .map(|m| (m.clone(), std::fs::read_to_string(src.join(format!("{m}.rs"))).unwrap()))
        .collect();
    let graph = module_graph(&lib_rs, &sources);
    // The graph is really read: a table is made for a loader and a queue.
    assert!(graph["table"].contains("loader") && graph["table"].contains("queue"), "{graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}\n{graph:#?}", cycle.join(" -> "));
    }
}

#[test]
fn the_checker_reads_paths_and_finds_cycles() {
    let lib_rs = "//! mod not_a_module;\nmod a;\nmod b;\npub mod sys;\npub use a::{Alpha, alpha as al};\npub use b::Beta;\n";
    let a = r##"use crate::{sys, Beta};
/// [`x`](crate::c::X) is a doc link
fn f() { let _ = "crate::c"; let _ = r#"crate::c "q""#; /* crate::c /* nested */ crate::c */ }
"##;
    let b = "use crate::sys::{self, x};\nfn g<'a>(c: char) -> &'a str { let _ = '\"'; crate::al(); \"\" }\n";
    let mut sources = BTreeMap::new();
    sources.insert("a".to_string(), a.to_string());
    sources.insert("b".to_string(), b.to_string());
    sources.insert("sys".to_string(), String::new());
    let graph = module_graph(lib_rs, &sources);
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(graph["a"], set(&["b", "sys"]));
    assert_eq!(graph["b"], set(&["a", "sys"]));
    assert_eq!(find_cycle(&graph), Some(vec!["a".to_string(), "b".to_string(), "a".to_string()]));
    sources.insert("b".to_string(), "use crate::{sys::{self, x}, };\n".to_string());
    let graph = module_graph(lib_rs, &sources);
    assert_eq!(graph["b"], set(&["sys"]));
    assert_eq!(find_cycle(&graph), None);
}
