//! Go's `%q` string quoting, for error texts that must match upstream's
//! byte for byte even when they embed strings chosen by a plugin, and the
//! bounded, escaped form of such strings in log lines.

use std::fmt::Write;

/// Quotes `s` the way Go's `strconv.Quote` (and so `fmt`'s `%q`) does:
/// printable characters stay as they are, `"` and `\` are escaped, and
/// everything else becomes `\a`-style, `\xHH`, `\uHHHH` or `\UHHHHHHHH`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_quoted(&mut out, c);
    }
    out.push('"');
    out
}

/// Text a peer chose, as a log line may carry it: at most `max` bytes of
/// it, with control and other unprintable characters escaped as
/// [`go_quote`] escapes them (so a peer cannot forge log lines with
/// newlines or terminal sequences), and a note of how much was cut.
pub fn log_text(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max) + 2);
    let mut used = 0;
    for (i, c) in s.char_indices() {
        if used + c.len_utf8() > max {
            let _ = write!(out, "... ({} more bytes)", s.len() - i);
            return out;
        }
        used += c.len_utf8();
        match c {
            '"' | '\\' => out.push(c),
            _ => push_quoted(&mut out, c),
        }
    }
    out
}

fn push_quoted(out: &mut String, c: char) {
    match c {
        '"' | '\\' => {
            out.push('\\');
            out.push(c);
        }
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        _ if is_go_printable(c) => out.push(c),
        _ if c < ' ' || c == '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        _ if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        _ => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols
/// and the ASCII space. Rust's debug escaping keeps exactly those
/// categories as they are, except that it also escapes quotes and, only
/// at the start of a string, combining marks; so the character is probed
/// behind a leading letter, and `'` is answered directly.
fn is_go_printable(c: char) -> bool {
    if c == '\'' || c == ' ' {
        return true;
    }
    let probe = ['a', c].iter().collect::<String>();
    probe.escape_debug().skip(1).eq(std::iter::once(c))
}

#[cfg(test)]
mod tests {
    use super::{go_quote, log_text};

    #[test]
    fn log_text_escapes_and_bounds_what_a_peer_sent() {
        assert_eq!(log_text("plain \"name\"", 64), "plain \"name\"");
        assert_eq!(
            log_text("evil\nlevel=error msg=forged\x1b[2J", 64),
            "evil\\nlevel=error msg=forged\\x1b[2J"
        );
        assert_eq!(
            log_text(&"x".repeat(100), 10),
            "xxxxxxxxxx... (90 more bytes)"
        );
        // Never cut inside a character.
        assert_eq!(log_text("aé", 2), "a... (2 more bytes)");
    }

    #[test]
    fn matches_go_strconv_quote() {
        // Expected values produced by Go's strconv.Quote.
        let cases = [
            ("", r#""""#),
            ("00-foo", r#""00-foo""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("it's", r#""it's""#),
            ("a b", r#""a b""#),
            ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
            ("\u{0}\u{1b}\u{7f}", r#""\x00\x1b\x7f""#),
            ("é✓日本", "\"é✓日本\""),
            ("e\u{301}", "\"e\u{301}\""),
            ("\u{a0}", r#""\u00a0""#),
            ("\u{200b}", r#""\u200b""#),
            ("\u{feff}", r#""\ufeff""#),
            ("\u{e000}", r#""\ue000""#),
            ("\u{1f600}", "\"\u{1f600}\""),
            ("\u{e0001}", r#""\U000e0001""#),
            ("\u{300}x", "\"\u{300}x\""),
            ("\u{2028}", r#""\u2028""#),
            ("\u{378}", r#""\u0378""#),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), want, "quoting {input:?}");
        }
    }
}
