//! Go's `%q` string quoting, so that rejection reasons match upstream's byte
//! for byte. Rust's `{:?}` differs for control and non-printable characters
//! (`\u{1}` where Go writes `\x01`).

use std::fmt::Write;

/// Quotes `s` like Go's `strconv.Quote`.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, c: char) {
    let code = u32::from(c);
    // Writing into a String cannot fail.
    let _ = match c {
        '"' | '\\' => write!(out, "\\{c}"),
        '\x07' => out.write_str("\\a"),
        '\x08' => out.write_str("\\b"),
        '\x0c' => out.write_str("\\f"),
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        '\x0b' => out.write_str("\\v"),
        _ if c.is_ascii_control() => write!(out, "\\x{code:02x}"),
        _ if c.is_ascii() || is_printable(c) => out.write_char(c),
        _ if code < 0x10000 => write!(out, "\\u{code:04x}"),
        _ => write!(out, "\\U{code:08x}"),
    };
}

/// Whether Go's `unicode.IsPrint` holds for a non-ASCII `c`.
///
/// Both Go and Rust's `Debug` call a character printable unless it is a
/// control, format, surrogate, private-use, unassigned or separator
/// character, so Rust's escaping decides. Rust also escapes combining marks
/// at the start of a string, which Go does not; the leading `a` avoids that.
/// (The two may disagree on characters new in one's Unicode version.)
fn is_printable(c: char) -> bool {
    let mut buf = [0u8; 5];
    buf[0] = b'a';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    std::str::from_utf8(&buf[..len]).is_ok_and(|s| s.escape_debug().nth(1) == Some(c))
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    #[test]
    fn quotes_like_go() {
        // Expected values are what Go's strconv.Quote returns.
        let cases = [
            ("", r#""""#),
            ("00-a", r#""00-a""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("\x07\x08\x0c\n\r\t\x0b", r#""\a\b\f\n\r\t\v""#),
            ("\x00\x01\x1f\x7f", r#""\x00\x01\x1f\x7f""#),
            ("é ü 日本", r#""é ü 日本""#),
            ("\u{80}\u{9f}", r#""\u0080\u009f""#),
            ("soft\u{ad}hyphen", r#""soft\u00adhyphen""#),
            ("\u{200b}\u{feff}\u{2028}", r#""\u200b\ufeff\u2028""#),
            ("\u{a0}", r#""\u00a0""#),
            ("\u{301}x\u{301}", "\"\u{301}x\u{301}\""),
            ("😀", "\"😀\""),
            ("\u{e000}\u{f0000}", r#""\ue000\U000f0000""#),
            ("'", r#""'""#),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), want, "{input:?}");
        }
    }
}
