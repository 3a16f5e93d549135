//! What reaches the operator's terminal. Every text `genesisctl` prints
//! comes from the server, and much of it from tenants (message bodies,
//! reasoning summaries, names, error details), so it must not be able to
//! drive the terminal: retitle the window (OSC), clear or repaint the screen
//! (CSI), hide text (a carriage return, backspaces) or set a hyperlink.
//!
//! [`strip_controls`] removes escape sequences whole (CSI, OSC, DCS and the
//! other string sequences, two-byte escapes) and every other C0 and C1
//! control and DEL, keeping only newline and tab; it is applied to every
//! text line and error line the CLI writes. [`escape_json_controls`] makes a
//! JSON line safe the lossless way: serde_json already escapes C0 controls,
//! and this escapes DEL and the C1 controls as `\u00XX` too, so a consumer
//! parsing the line still gets the exact value.
//!
//! Pure text functions: no I/O.

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';
/// C1 String Terminator.
const ST: char = '\u{9c}';

fn is_control(c: char) -> bool {
    let n = u32::from(c);
    n < 0x20 || n == 0x7f || (0x80..=0x9f).contains(&n)
}

/// `text` without terminal control sequences or control characters other
/// than `\n` and `\t`. Text with none is returned borrowed.
pub fn strip_controls(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| is_control(c) && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            ESC => match chars.peek().copied() {
                Some('[') => {
                    chars.next();
                    skip_csi(&mut chars);
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    skip_string(&mut chars);
                }
                // nF escapes: intermediates, then one final byte.
                Some(' '..='/') => {
                    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
                    chars.next_if(|c| ('0'..='~').contains(c));
                }
                // A two-byte escape (ESC c, ESC 7, ESC =, …).
                Some('0'..='~') => {
                    chars.next();
                }
                _ => {}
            },
            // The 8-bit forms of CSI and of the string sequences.
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if is_control(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Past a CSI's parameter and intermediate bytes and its final byte. A
/// character that cannot belong to it ends it without being taken.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars.next_if(|c| ('0'..='?').contains(c)).is_some() {}
    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
    chars.next_if(|c| ('@'..='~').contains(c));
}

/// Past a string sequence's body and its terminator (BEL, ESC \ or ST); an
/// unterminated one runs to the end of the text.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            BEL | ST => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

/// A JSON line with DEL and the C1 controls escaped as `\u00XX` (inside a
/// JSON string that is the same value; outside one they cannot occur).
pub fn escape_json_controls(line: &str) -> Cow<'_, str> {
    let needs = |c: char| c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c);
    if !line.chars().any(needs) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        if needs(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_removed_whole_and_text_is_kept() {
        for (text, want) in [
            ("plain text\twith tab\n", "plain text\twith tab\n"),
            ("a\u{1b}]0;pwned\u{07}b", "ab"),
            (
                "a\u{1b}]8;;http://evil\u{1b}\\link\u{1b}]8;;\u{1b}\\b",
                "alinkb",
            ),
            ("\u{1b}[2J\u{1b}[1;31mred\u{1b}[0m", "red"),
            ("a\u{1b}[?25lb", "ab"),
            ("over\rwrite\u{8}\u{8}x", "overwritex"),
            ("a\u{1b}cb\u{1b}(Bc", "abc"),
            (
                "8-bit \u{9b}2J csi \u{9d}0;t\u{9c}osc\u{85}",
                "8-bit  csi osc",
            ),
            ("bell\u{07} nul\u{0} del\u{7f}", "bell nul del"),
            ("unterminated \u{1b}]0;title", "unterminated "),
            ("trailing \u{1b}", "trailing "),
            ("üñí©ødé → ←", "üñí©ødé → ←"),
        ] {
            assert_eq!(strip_controls(text), want, "{text:?}");
        }
        assert!(matches!(strip_controls("clean"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_lines_escape_del_and_c1_losslessly() {
        let value = serde_json::json!({"body": "x\u{1b}]0;pwned\u{07}\u{9b}2J\u{7f}"});
        let line = escape_json_controls(&value.to_string()).into_owned();
        assert!(!line.chars().any(is_control), "{line:?}");
        let back: serde_json::Value = serde_json::from_str(&line).expect("still JSON");
        assert_eq!(back, value);
    }
}
