//! JSON text as the writer writes it: strings (escaped by serde_json, as Python's `json`
//! escapes them with `ensure_ascii=False`), floats in Python's `repr` form (serde_json's
//! differ: `1e16` and `1e-7` where Python writes `1e+16` and `1e-07`), integers, and the
//! ISO-8601 timestamps entries are stamped with.
//!
//! The binding's writer (`py/encode.rs`) and the fork's re-parenting write through these,
//! so lines are byte for byte what earlier versions (Python's `json`) wrote.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::engine::jsonl::civil_from_days;

/// Appends `s` as a JSON string, quotes included, escaped by serde_json's serializer:
/// `"`, `\\` and the control characters below U+0020 (`\n`, `\u001f`, ...), nothing else
/// (DEL, U+2028/2029 and all other text as they are), which is what Python's `json`
/// writes with `ensure_ascii=False`. (Python refuses lone surrogates, which a `&str`
/// cannot hold.)
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    use serde::Serializer;
    out.reserve(s.len() + 2);
    let mut ser = serde_json::Serializer::new(&mut *out);
    // Writing to a Vec cannot fail.
    let _ = (&mut ser).serialize_str(s);
}

/// Appends an integer.
pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a finite float as Python's `repr` (and so `json.dumps`) writes it: the shortest
/// digits that read back as the same float, positional from 1e-4 up to 1e16 (`0.0001`,
/// `100.0`), otherwise in exponent form with a sign and at least two digits (`1e-05`,
/// `1.5e+16`). Returns false, writing nothing, for NaN and the infinities (JSON has no
/// such numbers).
pub fn push_f64(out: &mut Vec<u8>, x: f64) -> bool {
    if !x.is_finite() {
        return false;
    }
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return true;
    }
    let mut buf = zmij::Buffer::new();
    let (digits, decpt) = shortest_digits(buf.format_finite(x));
    if x < 0.0 {
        out.push(b'-');
    }
    let d = digits.as_slice();
    let n = d.len() as i32;
    if decpt <= -4 || decpt > 16 {
        out.push(d[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&d[1..]);
        }
        let exp = decpt - 1;
        out.extend_from_slice(if exp < 0 { b"e-" } else { b"e+" });
        if exp.abs() < 10 {
            out.push(b'0');
        }
        push_i64(out, i64::from(exp.abs()));
    } else if decpt <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-decpt) as usize));
        out.extend_from_slice(d);
    } else if decpt >= n {
        out.extend_from_slice(d);
        out.extend(std::iter::repeat_n(b'0', (decpt - n) as usize));
        out.extend_from_slice(b".0");
    } else {
        out.extend_from_slice(&d[..decpt as usize]);
        out.push(b'.');
        out.extend_from_slice(&d[decpt as usize..]);
    }
    true
}

/// The significant digits of a formatted float (no leading or trailing zeros) and the
/// position of the decimal point relative to them: `d1 d2 ... × 10^(decpt - len)`.
fn shortest_digits(text: &str) -> (Vec<u8>, i32) {
    let text = text.trim_start_matches('-');
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let mut digits = Vec::with_capacity(20);
    let mut point = None;
    for &b in mantissa.as_bytes() {
        match b {
            b'.' => point = Some(digits.len()),
            b'0'..=b'9' => digits.push(b),
            _ => {}
        }
    }
    let int_len = point.unwrap_or(digits.len()) as i32;
    let lead = digits.iter().take_while(|&&b| b == b'0').count();
    digits.drain(..lead);
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    (digits, int_len - lead as i32 + exp)
}

/// `2026-11-30T16:48:30.123Z` for Unix milliseconds `ms` (what `_util.now_iso` writes).
pub fn iso_ms(ms: u64) -> [u8; 24] {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y.clamp(0, 9999) as u64);
    put(5, 2, u64::from(m));
    put(8, 2, u64::from(d));
    put(11, 2, rem / 3600);
    put(14, 2, rem / 60 % 60);
    put(17, 2, rem % 60);
    put(20, 3, ms % 1000);
    out
}

/// Now, as [`iso_ms`] writes it.
pub fn iso_now() -> [u8; 24] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    iso_ms(now.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> String {
        let mut out = Vec::new();
        push_str(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    fn f(x: f64) -> String {
        let mut out = Vec::new();
        assert!(push_f64(&mut out, x));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_escape_as_python_json_does() {
        // What `json.dumps(text, ensure_ascii=False)` writes.
        let cases = [
            ("", r#""""#),
            ("plain", r#""plain""#),
            ("quote \" and back\\slash", r#""quote \" and back\\slash""#),
            ("\n\r\t\u{8}\u{c}", r#""\n\r\t\b\f""#),
            (
                "\u{0}\u{1}\u{1f} \u{7f}",
                "\"\\u0000\\u0001\\u001f \u{7f}\"",
            ),
            (
                "déjà 日本語 🎉 \u{2028}\u{2029}\u{feff}",
                "\"déjà 日本語 🎉 \u{2028}\u{2029}\u{feff}\"",
            ),
            ("</script>", r#""</script>""#),
        ];
        for (text, want) in cases {
            assert_eq!(s(text), want, "{text:?}");
        }
        for b in 0u8..0x20 {
            let want = match b {
                0x08 => "\\b".to_owned(),
                0x09 => "\\t".to_owned(),
                0x0a => "\\n".to_owned(),
                0x0c => "\\f".to_owned(),
                0x0d => "\\r".to_owned(),
                _ => format!("\\u{b:04x}"),
            };
            assert_eq!(
                s(&format!("a{}b", b as char)),
                format!("\"a{want}b\""),
                "{b}"
            );
        }
    }

    #[test]
    fn floats_read_as_python_repr() {
        let cases = [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (-2.5, "-2.5"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (0.30000000000000004, "0.30000000000000004"),
            (2125.4436510000137, "2125.4436510000137"),
            (9_007_199_254_740_993.0, "9007199254740992.0"),
        ];
        for (x, want) in cases {
            assert_eq!(f(x), want, "{x:e}");
        }
        let mut out = Vec::new();
        assert!(!push_f64(&mut out, f64::NAN));
        assert!(!push_f64(&mut out, f64::NEG_INFINITY));
        assert!(out.is_empty());
    }

    #[test]
    fn floats_read_back_exactly() {
        let mut rng = fastrand::Rng::with_seed(9);
        for _ in 0..100_000 {
            let x = f64::from_bits(rng.u64(..));
            if !x.is_finite() {
                continue;
            }
            let text = f(x);
            assert_eq!(
                text.parse::<f64>().unwrap().to_bits(),
                x.to_bits(),
                "{text}"
            );
        }
    }

    #[test]
    fn iso_timestamps() {
        assert_eq!(&iso_ms(0), b"1970-01-01T00:00:00.000Z");
        assert_eq!(&iso_ms(1_796_056_110_123), b"2026-11-30T16:28:30.123Z");
        assert_eq!(&iso_ms(951_782_400_999), b"2000-02-29T00:00:00.999Z");
    }
}
