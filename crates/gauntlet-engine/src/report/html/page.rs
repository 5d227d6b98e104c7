//! What every HTML page gauntlet writes shares: the document around a page's body (its head with a
//! Content-Security-Policy that forbids fetching anything), the style sheet (light and dark, visible keyboard
//! focus), the line that stands in for an empty plot, the section links, and number formatting. A page is one
//! self-contained file: no script, no external asset, no network reference.
//!
//! The pages are maud templates (`html!`): every value spliced into one is escaped unless it is wrapped in
//! `PreEscaped`, so a page cannot forget an `escape()` call. maud rather than askama because its templates are Rust
//! expressions beside the code that computes what they show (a section stays a function returning `Markup`, easy
//! to read and to change with the records), it is two small crates over `syn`, which the build compiles anyway
//! (for serde and thiserror), and it has no template files to find at build time. The only markup spliced as
//! trusted is the SVG charts' (chart.rs), which escape their own text with [`escape`]. maud escapes `& < > "`;
//! characters that no page should carry (terminal and bidi controls from a server's text) are replaced once, over
//! the whole page, in [`document`].

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// Text for hand-written markup (the SVG charts): every byte that may come from a server or a file is escaped
/// (XML escaping is HTML-safe), and what no page may carry is replaced ([`crate::util::clean::markup`]).
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in crate::util::clean::markup(s).chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The style sheet: colours are variables so that a dark system theme swaps them; charts draw with classes, so
/// they follow the theme too.
pub(crate) const STYLE: &str = ":root{color-scheme:light dark;--fg:#1f2328;--bg:#fff;--muted:#656d76;\
--line:#d0d7de;--panel:#f6f8fa;--grid:#e4e7eb;--pass:#176c2b;--fail:#b00020;--warn:#8a5a00;--mark:#ffd76e;\
--ins:#d2f4d9;--del:#fbd6d9;--focus:#2f6fde}\
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#9198a1;--line:#3d444d;\
--panel:#161b22;--grid:#262c36;--pass:#56d364;--fail:#ff7b85;--warn:#e3b341;--mark:#7a5c00;--ins:#1b4721;\
--del:#5c1d24;--focus:#79a8ff}}\
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;padding:0 12px;color:var(--fg);\
background:var(--bg)}h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid var(--line)}\
h3{font-size:15px}table{border-collapse:collapse;width:100%}td,th{border:1px solid var(--line);padding:4px 6px;\
text-align:left;vertical-align:top}.fields td,dd{overflow-wrap:anywhere}\
.nowrap{white-space:nowrap}td.chart{min-width:300px}th{background:var(--panel)}code,pre{background:var(--panel);padding:0 3px}\
pre{padding:6px;white-space:pre-wrap;word-break:break-word;margin:4px 0}\
.pass{color:var(--pass);font-weight:600}.fail,.error,.regression{color:var(--fail);font-weight:600}\
.warn,.inconclusive,.running,.skip,.skipped{color:var(--warn);font-weight:600}.not-run,.pending,.candidate{color:var(--muted)}\
.improvement{color:var(--pass)}.none,.muted{color:var(--muted)}.none{font-style:italic}\
.verdict{font-size:18px;padding:2px 10px;border:2px solid currentColor;border-radius:6px}\
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:600}dd{margin:0}\
nav a{margin-right:12px}a{color:var(--focus)}\
a:focus-visible,summary:focus-visible,[tabindex]:focus-visible{outline:3px solid var(--focus);outline-offset:2px}\
summary{cursor:pointer}mark{background:var(--mark);color:inherit}ins{background:var(--ins);text-decoration:none}\
del{background:var(--del);text-decoration:none}.differs{color:var(--warn);font-weight:600}\
svg{display:block;margin:8px 0;max-width:100%;height:auto}svg text{fill:var(--fg)}\
svg .frame{fill:var(--panel);stroke:var(--line)}svg .grid{stroke:var(--grid)}\
svg .mark{stroke:var(--muted);stroke-dasharray:3 3}";

/// The whole page: the document head (its policy allows inline style only), the `<h1>` and `body`; every
/// character that XML 1.0 cannot carry or that steers a terminal or the text direction is replaced by U+FFFD.
pub(crate) fn document(title: &str, body: Markup) -> String {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { "\n" h1 { (title) } "\n" (body) }
        }
    };
    let mut out = crate::util::clean::markup(&page.0);
    out.push('\n');
    out
}

/// A line in place of a plot or a table that has nothing to show, saying why.
pub(crate) fn none(why: &str) -> Markup {
    html! { p.none { (why) } "\n" }
}

/// A chart drawn by chart.rs (which escapes its own text), or the line saying why there is none.
pub(crate) fn chart(svg: Option<String>, why_none: impl FnOnce() -> String) -> Markup {
    match svg {
        Some(svg) => PreEscaped(svg),
        None => none(&why_none()),
    }
}

/// Keyboard-reachable links to the page's sections: `(anchor, label)`.
pub(crate) fn nav(sections: &[(&str, &str)]) -> Markup {
    html! {
        nav aria-label="sections" { @for (id, label) in sections { a href={ "#" (id) } { (label) } } }
        "\n"
    }
}

/// A tick-label number: three significant figures at most, no trailing zeros.
pub(crate) fn num(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s }
}

/// At most `max` characters of `s` (never cut inside a character), with how many were left out.
pub(crate) fn clip(s: &str, max: usize) -> (String, usize) {
    let n = s.chars().count();
    if n <= max { (s.to_owned(), 0) } else { (s.chars().take(max).collect(), n - max) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_is_escaped() {
        assert_eq!(
            escape("<script>\"x\" & 'y'</script>\u{7}"),
            "&lt;script&gt;&quot;x&quot; &amp; &apos;y&apos;&lt;/script&gt;\u{fffd}"
        );
    }

    #[test]
    fn numbers_and_clips() {
        assert_eq!(num(0.6000000000000001), "0.6");
        assert_eq!(num(123.4), "123");
        assert_eq!(clip("héllo", 2), ("hé".to_owned(), 3));
        assert_eq!(clip("ab", 2), ("ab".to_owned(), 0));
    }

    #[test]
    fn the_head_forbids_every_fetch() {
        let h = document("<x>", html! { p { "<y>\u{1b}[31m\u{202e}" } });
        assert!(h.contains("default-src 'none'") && h.contains("<title>&lt;x&gt;</title>"), "{h}");
        assert!(h.contains("prefers-color-scheme:dark"), "a dark theme");
        assert!(h.contains("<p>&lt;y&gt;\u{fffd}[31m\u{fffd}</p>"), "text escaped, controls replaced: {h}");
        assert!(h.starts_with("<!DOCTYPE html><html lang=\"en\">"), "{h}");
    }
}
