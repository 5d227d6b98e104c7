//! The book (`docs/`, mdBook) builds, and every internal link of what it builds resolves: a relative link names a
//! file of the built book, and a `#fragment` names an element id of its page. mdbook itself does not fail on a
//! broken link, so the links are checked here, on the HTML a reader gets (includes and generated pages included);
//! an absolute path is taken from the book's root, where a site serves it.
//! mdbook is installed by `scripts/setup.sh --test` into `$GAUNTLET_HOME/mdbook`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `$GAUNTLET_MDBOOK`, else the one `scripts/setup.sh --test` installs, else `mdbook` on PATH.
fn mdbook() -> PathBuf {
    if let Some(p) = std::env::var_os("GAUNTLET_MDBOOK").filter(|p| !p.is_empty()) {
        return p.into();
    }
    let cached = gauntlet_engine::util::home_dir().join("mdbook/bin/mdbook");
    if cached.is_file() {
        return cached;
    }
    let on_path =
        std::env::var_os("PATH").iter().flat_map(std::env::split_paths).map(|d| d.join("mdbook")).find(|p| p.is_file());
    on_path.expect("mdbook is not installed: run scripts/setup.sh --test (it installs it into $GAUNTLET_HOME/mdbook)")
}

/// `mdbook build docs` into `dest`, killed (and the test failed) past two minutes; its stderr (kept in a file, so
/// that no pipe can fill and stall it).
fn build(dest: &Path) -> String {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let log = tempfile::NamedTempFile::new().expect("mdbook's log file");
    let mut child = Command::new(mdbook())
        .arg("build")
        .arg(&docs)
        .arg("--dest-dir")
        .arg(dest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("reopen the log file"))
        .spawn()
        .expect("start mdbook");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mdbook") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mdbook build did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(status.success(), "mdbook build failed ({status}):\n{stderr}");
    stderr
}

/// Every value of `attr="…"` in `html`, entities of a URL decoded.
fn attribute_values<'a>(html: &'a str, attr: &str) -> Vec<String> {
    let needle = format!(" {attr}=\"");
    let mut out = Vec::new();
    let mut rest: &'a str = html;
    while let Some(i) = rest.find(&needle) {
        rest = &rest[i + needle.len()..];
        let Some(end) = rest.find('"') else { break };
        out.push(rest[..end].replace("&amp;", "&").replace("&quot;", "\"").replace("&#39;", "'"));
        rest = &rest[end..];
    }
    out
}

/// `%XX` escapes decoded (fragments of headings with non-ASCII text).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (bytes.get(i + 1).and_then(|&b| hex(b)), bytes.get(i + 2).and_then(|&b| hex(b)))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the built book") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

/// Every broken internal link of the built book at `root`: (page, link, why); and how many links were checked.
fn broken_links(root: &Path) -> (Vec<(String, String, String)>, usize) {
    let mut pages = Vec::new();
    html_files(root, &mut pages);
    let root = root.canonicalize().expect("canonical book root");
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut texts: BTreeMap<PathBuf, String> = BTreeMap::new();
    for page in &pages {
        let page = page.canonicalize().expect("canonical page");
        let text = std::fs::read_to_string(&page).expect("read page");
        ids.insert(page.clone(), attribute_values(&text, "id").into_iter().collect());
        texts.insert(page, text);
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for (page, text) in &texts {
        let shown = page.strip_prefix(&root).unwrap_or(page).display().to_string();
        let links = attribute_values(text, "href").into_iter().chain(attribute_values(text, "src"));
        for link in links {
            let external = ["http:", "https:", "mailto:", "data:", "javascript:"].iter().any(|p| link.starts_with(p));
            if external || link.starts_with("//") {
                continue;
            }
            checked += 1;
            let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let path = path.split_once('?').map_or(path, |(p, _)| p);
            let target = if path.is_empty() {
                page.clone()
            } else {
                // An absolute path (mdbook's 404 page has them) is the book served at its site root.
                let base = if path.starts_with('/') { root.as_path() } else { page.parent().expect("page folder") };
                let joined = base.join(percent_decoded(path).trim_start_matches('/'));
                let joined = if joined.is_dir() { joined.join("index.html") } else { joined };
                match joined.canonicalize() {
                    Ok(t) if t.starts_with(&root) => t,
                    Ok(_) => {
                        broken.push((shown.clone(), link.clone(), "outside the book".into()));
                        continue;
                    }
                    Err(_) => {
                        broken.push((shown.clone(), link.clone(), "no such file in the book".into()));
                        continue;
                    }
                }
            };
            if fragment.is_empty() {
                continue;
            }
            match ids.get(&target) {
                Some(known) if known.contains(&percent_decoded(fragment)) => {}
                Some(_) => broken.push((shown.clone(), link.clone(), "no element with that id".into())),
                None => broken.push((shown.clone(), link.clone(), "a fragment on a page that is not HTML".into())),
            }
        }
    }
    (broken, checked)
}

#[test]
fn the_book_builds_and_every_internal_link_resolves() {
    let dest = tempfile::tempdir().expect("scratch folder");
    let stderr = build(dest.path());
    // A chapter's include that cannot be read, or a chapter mdbook cannot place, is logged, not fatal.
    let problems: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR") || l.contains("WARN")).collect();
    assert!(problems.is_empty(), "mdbook build reported problems:\n{}", problems.join("\n"));
    let (broken, checked) = broken_links(dest.path());
    let listed: Vec<String> = broken.iter().map(|(page, link, why)| format!("{page}: {link} ({why})")).collect();
    assert!(broken.is_empty(), "{} broken link(s) in the book:\n{}", broken.len(), listed.join("\n"));
    // The book has some thirty pages, each with the sidebar's links and its own: a checker that found few saw nothing.
    assert!(checked > 500, "only {checked} internal links were checked");
}

#[test]
fn the_link_checker_finds_a_missing_page_and_a_missing_anchor() {
    let dir = tempfile::tempdir().expect("scratch folder");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(
        dir.path().join("a.html"),
        r##"<h2 id="here">x</h2><a href="sub/b.html#there">b</a><a href="#here">a</a>"##,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("sub/b.html"),
        r##"<p id="there"></p><a href="../a.html#nowhere">x</a><a href="c.html">y</a><img src="../a.html"><a href="https://example.invalid/x">z</a>"##,
    )
    .unwrap();
    let (broken, checked) = broken_links(dir.path());
    let links: Vec<&str> = broken.iter().map(|(_, link, _)| link.as_str()).collect();
    assert_eq!(links, ["../a.html#nowhere", "c.html"], "{broken:?}");
    assert_eq!(checked, 5);
}

/// A heading's anchor as GitHub makes it: lower case, punctuation but `-` and `_` dropped, spaces to `-`.
fn github_anchor(heading: &str) -> String {
    let text = heading.trim_start_matches('#').trim().to_lowercase();
    text.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The targets of the Markdown links `[text](target)` in `text`, outside code blocks.
fn markdown_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

/// The README is not part of the book but points into it: each of its relative links names a file of the
/// repository, and a `#fragment` a heading of that file (or of the README).
#[test]
fn every_link_of_the_readme_resolves() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("README.md");
    let mut broken = Vec::new();
    let links = markdown_links(&readme);
    for link in &links {
        if link.starts_with("http:") || link.starts_with("https:") {
            continue;
        }
        let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
        let target = if path.is_empty() { repo.join("README.md") } else { repo.join(path) };
        if !target.exists() {
            broken.push(format!("{link} (no such file)"));
            continue;
        }
        if !fragment.is_empty() {
            let text = std::fs::read_to_string(&target).unwrap_or_default();
            if !text.lines().filter(|l| l.starts_with('#')).any(|h| github_anchor(h) == fragment) {
                broken.push(format!("{link} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links in README.md:\n{}", broken.join("\n"));
    assert!(links.len() > 20, "only {} links found in README.md", links.len());
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a docs folder") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// A code fence left open swallows the rest of its page into one code block, which no link check sees: every
/// Markdown file of the docs (and the README, and fuzz/README.md) closes each fence it opens.
#[test]
fn every_code_block_of_the_docs_is_closed() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![repo.join("README.md"), repo.join("fuzz/README.md")];
    markdown_files(&repo.join("docs"), &mut files);
    assert!(files.len() > 30, "only {} Markdown files found", files.len());
    let open: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).expect("read a Markdown file");
            text.lines().filter(|l| l.trim_start().starts_with("```")).count() % 2 == 1
        })
        .map(|f| f.strip_prefix(&repo).unwrap_or(f).display().to_string())
        .collect();
    assert!(open.is_empty(), "a code block left open in: {}", open.join(", "));
}
