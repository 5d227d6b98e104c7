//! The one rule for text that someone else wrote (a server, a log, a bundle) on its way into what gauntlet writes
//! for people and CI: report.md, qualification.md, the step summary, the HTML and JUnit reports, GitHub
//! annotations and the terminal (issue 32, D13/D14). Which characters are hostile is decided here, once; each
//! writer shows them in its own format's way (`\uXXXX` in plain text, a space in inline Markdown, `%XX` in a
//! workflow command's data, U+FFFD in HTML and XML), and [`line`] is the plain-text form.

/// Whether `c` must never reach an output as itself: a control character other than a tab (escape sequences,
/// BEL, carriage returns, NUL, C1 controls), a line or paragraph separator, or a bidirectional control (U+061C,
/// U+200E/F, U+202A–U+202E, U+2066–U+2069), which reorders what a reader sees.
pub fn is_hostile(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Text as an XML 1.0 (or HTML) document may carry it: every hostile character but a line break, and the two
/// noncharacters XML forbids (U+FFFE, U+FFFF), replaced by U+FFFD, so the reader sees that something was there.
/// Escaping `& < > "` is left to the writer of the format.
pub(crate) fn markup(text: &str) -> String {
    text.chars()
        .map(|c| {
            let hostile = is_hostile(c) && !matches!(c, '\n' | '\r');
            if hostile || c == '\u{fffe}' || c == '\u{ffff}' { '\u{fffd}' } else { c }
        })
        .collect()
}

/// One line of text as it may be written in plain text (the terminal, a log tail quoted in a report): secrets
/// redacted; every hostile character shown as `\uXXXX` (readable, and still valid inside a JSON string); and a
/// line that GitHub Actions would read as a workflow command defused: `::command::` at the start of the line
/// (after any whitespace) gets a leading `\`, and `##[` anywhere a zero-width space between its two `#`.
pub fn line(text: &str) -> String {
    let text = super::redact::text(text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hostile(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    let out = out.replace("##[", "#\u{200b}#[");
    if out.trim_start().starts_with("::") { format!("\\{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_workflow_commands_are_defused() {
        assert_eq!(line("\u{1b}[31mRED\u{7}"), "\\u001b[31mRED\\u0007");
        assert_eq!(line("a\u{202e}b\u{2066}c\u{200f}"), "a\\u202eb\\u2066c\\u200f");
        assert_eq!(line("::add-mask::abc"), "\\::add-mask::abc");
        assert_eq!(line("  ::error::x"), "\\  ::error::x");
        assert_eq!(line("x ##[group]y"), "x #\u{200b}#[group]y");
        assert_eq!(line("tab\tstays é"), "tab\tstays é");
        assert_eq!(
            markup("a\u{1b}[1m\u{0}\u{85}\u{202e}\u{ffff}\n\r\tb"),
            "a\u{fffd}[1m\u{fffd}\u{fffd}\u{fffd}\u{fffd}\n\r\tb"
        );
        assert!(is_hostile('\u{85}') && is_hostile('\r') && !is_hostile('\t') && !is_hostile('é'));
    }
}
