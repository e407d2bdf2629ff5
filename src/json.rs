//! Canonical JSON: turns untrusted payload bytes into exactly the text that
//! JavaScript's `JSON.stringify(JSON.parse(input))` produces.
//!
//! Why: workers verify `X-HYPER-SIGNATURE` (see `crate::signature`) by
//! re-serialising the parsed body with `JSON.stringify`, so the bytes hookq
//! signs and sends must already be in that form, byte for byte.
//!
//! The implementation is a small dedicated, non-recursive parser that writes
//! the canonical output while it reads (one pass, one output allocation).
//! Objects are written in place; only objects that contain duplicate keys or
//! array-index keys (`"0"`, `"1"`, ...) are rewritten afterwards, because
//! that is where JavaScript's property order differs from document order.
//!
//! Documented differences from `JSON.parse`:
//! * string escapes that decode to a lone UTF-16 surrogate (`"\ud800"`) are
//!   rejected ([`JsonError::LoneSurrogate`]): Rust strings cannot hold them;
//! * input must be valid UTF-8 ([`JsonError::InvalidUtf8`]);
//! * nesting deeper than [`MAX_DEPTH`] is rejected ([`JsonError::TooDeep`]).
//!   Node itself overflows its stack a little above 4000 levels.

use std::fmt;

/// Maximum nesting of arrays/objects accepted by [`canonicalize`].
pub const MAX_DEPTH: usize = 1000;

/// The canonical bytes of a JSON document: exactly what JavaScript's
/// JSON.stringify(JSON.parse(input)) produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalJson(String);

impl CanonicalJson {
    /// Wrap already-canonical text read back from storage (no re-validation).
    pub(crate) fn from_stored(s: String) -> Self {
        Self(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The canonical text as bytes (what gets signed and sent).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false for output of [`canonicalize`]; present for API hygiene.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True iff the top-level value is an object.
    pub fn is_object(&self) -> bool {
        // Canonical text has no leading whitespace, so the first byte decides.
        self.0.starts_with('{')
    }
}

impl fmt::Display for CanonicalJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for CanonicalJson {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<CanonicalJson> for String {
    fn from(c: CanonicalJson) -> Self {
        c.0
    }
}

/// Why an input was rejected. Lines and columns are 1-based; columns count
/// characters, not bytes. Messages do not repeat "malformed JSON" so callers
/// can prefix them (`format!("malformed JSON: {e}")`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    #[error("{reason} at line {line}, column {column}")]
    Malformed {
        line: usize,
        column: usize,
        reason: &'static str,
    },
    #[error("unsupported lone UTF-16 surrogate escape at line {line}, column {column}")]
    LoneSurrogate { line: usize, column: usize },
    #[error("input is not valid UTF-8 (byte offset {offset})")]
    InvalidUtf8 { offset: usize },
    #[error("nesting deeper than {max} levels at line {line}, column {column}")]
    TooDeep {
        line: usize,
        column: usize,
        max: usize,
    },
}

/// Parse `input` as JSON (as strictly as `JSON.parse`) and return the text
/// `JSON.stringify` would produce for the parsed value.
pub fn canonicalize(input: &[u8]) -> Result<CanonicalJson, JsonError> {
    // JSON.parse works on a JS string; the UTF-8 BOM would be U+FEFF there,
    // which is not JSON whitespace, so JSON.parse rejects it. Say so clearly.
    if input.starts_with(b"\xEF\xBB\xBF") {
        return Err(JsonError::Malformed {
            line: 1,
            column: 1,
            reason: "byte order mark (BOM) is not allowed",
        });
    }
    let src = std::str::from_utf8(input).map_err(|e| JsonError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    Parser::new(src).run().map(CanonicalJson)
}

#[derive(Clone, Copy)]
enum Frame {
    Array,
    /// `start`: offset of `{` in the output; `members_base`: where this
    /// object's entries begin in `Parser::members`.
    Object {
        start: usize,
        members_base: usize,
    },
}

/// One `"key":value` already written to the output. Offsets into `out`:
/// key text (with quotes) is `key_start..key_end`, `:` sits at `key_end`,
/// value text is `key_end + 1..val_end`.
#[derive(Clone, Copy)]
struct Member {
    key_start: usize,
    key_end: usize,
    val_end: usize,
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    out: String,
    stack: Vec<Frame>,
    /// Members of all currently open objects, innermost last.
    members: Vec<Member>,
    /// Reused buffers for the (rare) object rewrite.
    scratch: String,
    order: Vec<usize>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            // Canonical output is almost never longer than the input.
            out: String::with_capacity(src.len()),
            stack: Vec::new(),
            members: Vec::new(),
            scratch: String::new(),
            order: Vec::new(),
        }
    }

    /// Iterative (not recursive) so hostile nesting cannot overflow the
    /// thread stack; depth is bounded by MAX_DEPTH instead.
    fn run(mut self) -> Result<String, JsonError> {
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(b'{') => {
                    // Empty containers count too: depth is what JS would recurse.
                    self.check_depth()?;
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        self.out.push_str("{}");
                    } else {
                        self.stack.push(Frame::Object {
                            start: self.out.len(),
                            members_base: self.members.len(),
                        });
                        self.out.push('{');
                        self.member_key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    // Empty containers count too: depth is what JS would recurse.
                    self.check_depth()?;
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        self.out.push_str("[]");
                    } else {
                        self.stack.push(Frame::Array);
                        self.out.push('[');
                        continue 'value;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal("true")?,
                Some(b'f') => self.literal("false")?,
                Some(b'n') => self.literal("null")?,
                Some(_) => return Err(self.malformed(self.pos, "expected a JSON value")),
                None => return Err(self.malformed(self.pos, "unexpected end of input")),
            }

            // A value is complete: close as many containers as the input closes.
            loop {
                let Some(&frame) = self.stack.last() else {
                    self.skip_ws();
                    if self.pos != self.bytes.len() {
                        return Err(
                            self.malformed(self.pos, "unexpected data after the JSON value")
                        );
                    }
                    return Ok(self.out);
                };
                self.skip_ws();
                match frame {
                    Frame::Array => match self.peek() {
                        Some(b',') => {
                            self.pos += 1;
                            self.out.push(',');
                            continue 'value;
                        }
                        Some(b']') => {
                            self.pos += 1;
                            self.out.push(']');
                            self.stack.pop();
                        }
                        _ => return Err(self.malformed(self.pos, "expected ',' or ']' in array")),
                    },
                    Frame::Object {
                        start,
                        members_base,
                    } => {
                        if let Some(m) = self.members.last_mut() {
                            m.val_end = self.out.len();
                        }
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.out.push(',');
                                self.skip_ws();
                                self.member_key()?;
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                self.out.push('}');
                                self.finish_object(start, members_base);
                                self.stack.pop();
                            }
                            _ => {
                                return Err(
                                    self.malformed(self.pos, "expected ',' or '}' in object")
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        // JSON whitespace only; JSON.parse rejects NBSP, BOM, etc.
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn check_depth(&self) -> Result<(), JsonError> {
        if self.stack.len() >= MAX_DEPTH {
            let (line, column) = line_col(self.bytes, self.pos);
            return Err(JsonError::TooDeep {
                line,
                column,
                max: MAX_DEPTH,
            });
        }
        Ok(())
    }

    fn malformed(&self, at: usize, reason: &'static str) -> JsonError {
        let (line, column) = line_col(self.bytes, at);
        JsonError::Malformed {
            line,
            column,
            reason,
        }
    }

    /// Parses `"key":` (cursor on the opening quote) and records the member.
    fn member_key(&mut self) -> Result<(), JsonError> {
        if self.peek() != Some(b'"') {
            return Err(self.malformed(self.pos, "expected a string key"));
        }
        let key_start = self.out.len();
        self.string()?;
        let key_end = self.out.len();
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.malformed(self.pos, "expected ':' after object key"));
        }
        self.pos += 1;
        self.out.push(':');
        self.members.push(Member {
            key_start,
            key_end,
            val_end: key_end + 1,
        });
        Ok(())
    }

    fn literal(&mut self, word: &'static str) -> Result<(), JsonError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            self.out.push_str(word);
            Ok(())
        } else {
            Err(self.malformed(self.pos, "expected a JSON value"))
        }
    }

    fn number(&mut self) -> Result<(), JsonError> {
        let start = self.pos;
        let b = self.bytes;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        let int_start = i;
        match b.get(i) {
            // A leading zero ends the integer part; "01" then fails as trailing data.
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = skip_digits(b, i),
            _ => return Err(self.malformed(i, "expected a digit")),
        }
        let int_digits = i - int_start;
        let mut is_integer = true;
        if b.get(i) == Some(&b'.') {
            is_integer = false;
            let frac_start = i + 1;
            i = skip_digits(b, frac_start);
            if i == frac_start {
                return Err(self.malformed(i, "expected a digit after '.'"));
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            is_integer = false;
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let exp_start = i;
            i = skip_digits(b, exp_start);
            if i == exp_start {
                return Err(self.malformed(i, "expected a digit in exponent"));
            }
        }
        self.pos = i;
        let text = &self.src[start..i];

        // Fast path: integers below 1e15 are exact doubles, and JS prints
        // them back digit for digit (only "-0" changes, to "0").
        if is_integer && int_digits <= 15 {
            if text == "-0" {
                self.out.push('0');
            } else {
                self.out.push_str(text);
            }
            return Ok(());
        }

        // Like JS, every number is a double. Rust's parser rounds correctly
        // and yields +-inf on overflow, where JS gives +-Infinity too.
        let value: f64 = text
            .parse()
            .map_err(|_| self.malformed(start, "invalid number"))?;
        if !value.is_finite() {
            // JSON.stringify(Infinity) is "null".
            self.out.push_str("null");
        } else if value == 0.0 {
            // Covers -0 (and underflow to -0): JS prints both zeros as "0".
            self.out.push('0');
        } else {
            let mut buf = ryu_js::Buffer::new();
            self.out.push_str(buf.format_finite(value));
        }
        Ok(())
    }

    /// Parses a string (cursor on the opening quote) and writes it escaped
    /// exactly as JSON.stringify escapes.
    fn string(&mut self) -> Result<(), JsonError> {
        let open = self.pos;
        self.pos += 1;
        self.out.push('"');
        loop {
            // Copy the longest run that needs no attention in one go. The run
            // ends on an ASCII byte, so slicing `src` there is on a char boundary.
            let run = self.bytes[self.pos..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20);
            let Some(len) = run else {
                return Err(self.malformed(open, "unterminated string"));
            };
            self.out.push_str(&self.src[self.pos..self.pos + len]);
            self.pos += len;
            match self.bytes[self.pos] {
                b'"' => {
                    self.pos += 1;
                    self.out.push('"');
                    return Ok(());
                }
                b'\\' => self.escape()?,
                _ => {
                    return Err(self.malformed(self.pos, "unescaped control character in string"));
                }
            }
        }
    }

    /// Decodes one escape sequence (cursor on the backslash).
    fn escape(&mut self) -> Result<(), JsonError> {
        let at = self.pos;
        let Some(&kind) = self.bytes.get(at + 1) else {
            return Err(self.malformed(at, "unterminated string"));
        };
        self.pos += 2;
        let out = &mut self.out;
        match kind {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'/' => out.push('/'),
            b'b' => out.push_str("\\b"),
            b'f' => out.push_str("\\f"),
            b'n' => out.push_str("\\n"),
            b'r' => out.push_str("\\r"),
            b't' => out.push_str("\\t"),
            b'u' => {
                let unit = self.hex4()?;
                let code = match unit {
                    0xD800..=0xDBFF => {
                        // A high surrogate is only representable together
                        // with an immediately following low-surrogate escape.
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return Err(self.lone_surrogate(at));
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.lone_surrogate(at));
                        }
                        0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return Err(self.lone_surrogate(at)),
                    _ => unit,
                };
                let Some(ch) = char::from_u32(code) else {
                    return Err(self.lone_surrogate(at));
                };
                push_escaped_char(&mut self.out, ch);
            }
            _ => return Err(self.malformed(at, "invalid escape sequence")),
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut value = 0u32;
        for k in 0..4 {
            let digit = self
                .bytes
                .get(self.pos + k)
                .and_then(|&c| (c as char).to_digit(16))
                .ok_or_else(|| self.malformed(self.pos + k, "invalid \\u escape"))?;
            value = value * 16 + digit;
        }
        self.pos += 4;
        Ok(value)
    }

    fn lone_surrogate(&self, at: usize) -> JsonError {
        let (line, column) = line_col(self.bytes, at);
        JsonError::LoneSurrogate { line, column }
    }

    /// Called right after an object's `}` was written. Objects whose keys
    /// are all distinct non-index strings are already canonical in place;
    /// otherwise rewrite them in JavaScript property order.
    fn finish_object(&mut self, start: usize, members_base: usize) {
        let members = &self.members[members_base..];
        let out = &self.out;
        let key = |m: &Member| &out[m.key_start..m.key_end];

        let has_index_key = members.iter().any(|m| array_index(key(m)).is_some());
        // Keys compare by their canonical (escaped) text, which is a
        // one-to-one encoding of the decoded key, so `"\u0061"` equals `"a"`.
        let has_duplicate = if members.len() <= 16 {
            members
                .iter()
                .enumerate()
                .any(|(i, a)| members[i + 1..].iter().any(|b| key(a) == key(b)))
        } else {
            self.order.clear();
            self.order.extend(0..members.len());
            self.order
                .sort_unstable_by(|&a, &b| key(&members[a]).cmp(key(&members[b])));
            self.order
                .windows(2)
                .any(|w| key(&members[w[0]]) == key(&members[w[1]]))
        };

        if has_index_key || has_duplicate {
            rewrite_object(
                &mut self.out,
                start,
                &self.members[members_base..],
                &mut self.order,
                &mut self.scratch,
            );
        }
        self.members.truncate(members_base);
    }
}

/// Rewrites `out[start..]` (one complete object) in JS property order:
/// array-index keys ascending, then other keys in first-occurrence order;
/// for duplicate keys the last value wins at the first key's position.
fn rewrite_object(
    out: &mut String,
    start: usize,
    members: &[Member],
    order: &mut Vec<usize>,
    scratch: &mut String,
) {
    let text = out.as_str();
    let key = |i: usize| &text[members[i].key_start..members[i].key_end];

    // Group equal keys (stable sort keeps occurrences in document order);
    // each group becomes one slot: (first occurrence, last occurrence).
    order.clear();
    order.extend(0..members.len());
    order.sort_by(|&a, &b| key(a).cmp(key(b)));
    let mut slots: Vec<(usize, usize)> = Vec::with_capacity(members.len());
    let mut g = 0;
    while g < order.len() {
        let mut last = g;
        while last + 1 < order.len() && key(order[last + 1]) == key(order[g]) {
            last += 1;
        }
        slots.push((order[g], order[last]));
        g = last + 1;
    }
    // Index keys first by numeric value (unique after grouping), then the
    // rest by position of first occurrence.
    slots.sort_by_key(|&(first, _)| match array_index(key(first)) {
        Some(n) => (0, u64::from(n)),
        None => (1, first as u64),
    });

    scratch.clear();
    scratch.push('{');
    for (n, &(first, last)) in slots.iter().enumerate() {
        if n > 0 {
            scratch.push(',');
        }
        scratch.push_str(key(first));
        scratch.push(':');
        let value = &members[last];
        scratch.push_str(&text[value.key_end + 1..value.val_end]);
    }
    scratch.push('}');
    out.truncate(start);
    out.push_str(scratch);
}

/// If `quoted_key` (canonical text incl. quotes) is an ECMAScript array
/// index ("0".."4294967294", no leading zeros or sign), its numeric value.
fn array_index(quoted_key: &str) -> Option<u32> {
    let digits = quoted_key.get(1..quoted_key.len().checked_sub(1)?)?;
    let b = digits.as_bytes();
    if b.is_empty() || b.len() > 10 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    // 2^32 - 1 is not an array index (it is the max array length).
    if n < u64::from(u32::MAX) {
        u32::try_from(n).ok()
    } else {
        None
    }
}

fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// Writes `ch` into a JSON string body the way JSON.stringify does.
fn push_escaped_char(out: &mut String, ch: char) {
    match ch {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let v = c as usize;
            out.push_str("\\u00");
            out.push(HEX[v >> 4] as char);
            out.push(HEX[v & 0xf] as char);
        }
        c => out.push(c),
    }
}

/// 1-based line and column (in characters) of byte offset `at`.
fn line_col(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at.min(bytes.len())];
    let line = 1 + before.iter().filter(|&&c| c == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    // Count chars by skipping UTF-8 continuation bytes.
    let column = 1 + before[line_start..]
        .iter()
        .filter(|&&c| (c & 0xC0) != 0x80)
        .count();
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn canon(s: &str) -> String {
        match canonicalize(s.as_bytes()) {
            Ok(c) => c.into_string(),
            Err(e) => panic!("{s:?} rejected: {e}"),
        }
    }

    /// Cases where JS output differs from naive Rust/serde output. Expected
    /// values were produced with Node 20 `JSON.stringify(JSON.parse(s))`.
    #[test]
    fn js_formatting_table() {
        let cases: &[(&str, &str)] = &[
            // numbers
            ("1.0", "1"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("-1e-400", "0"),
            ("1e-400", "0"),
            ("1e400", "null"),
            ("-1e400", "null"),
            ("[1e400]", "[null]"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1E+2", "100"),
            ("1.5e-7", "1.5e-7"),
            ("0.000001", "0.000001"),
            ("0.0000001", "1e-7"),
            ("12345678901234567890", "12345678901234567000"),
            ("123456789012345678901", "123456789012345680000"),
            ("9007199254740993", "9007199254740992"),
            ("999999999999999", "999999999999999"),
            ("0.1", "0.1"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("-2.50E3", "-2500"),
            ("100e-2", "1"),
            // strings and escapes
            (r#""\u0041\/\u00e9""#, r#""A/é""#),
            (r#""\b\f\n\r\t\"\\""#, r#""\b\f\n\r\t\"\\""#),
            (r#""\u0000\u001F\u007f""#, "\"\\u0000\\u001f\u{7f}\""),
            (r#""\u2028\u2029""#, "\"\u{2028}\u{2029}\""),
            (r#""\uD83D\uDE00""#, "\"😀\""),
            ("\"😀 é \u{feff}\"", "\"😀 é \u{feff}\""),
            (r#""\u0022""#, r#""\"""#),
            // containers and whitespace
            (
                " {\n\t\"a\" : [ 1 , 2 ] ,\r\"b\":{ } } ",
                r#"{"a":[1,2],"b":{}}"#,
            ),
            ("[]", "[]"),
            ("{}", "{}"),
            ("[[],{},[{}]]", "[[],{},[{}]]"),
            // integer-like keys first, ascending; everything else in order
            (
                r#"{"b":1,"a":2,"1":3,"0":4}"#,
                r#"{"0":4,"1":3,"b":1,"a":2}"#,
            ),
            (
                r#"{"z":0,"01":1,"-1":2,"4294967295":3,"4294967294":4,"1.5":5,"10":6,"9":7}"#,
                r#"{"9":7,"10":6,"4294967294":4,"z":0,"01":1,"-1":2,"4294967295":3,"1.5":5}"#,
            ),
            // duplicates: last value wins, first position kept
            (r#"{"a":1,"b":2,"a":3}"#, r#"{"a":3,"b":2}"#),
            (r#"{"a":1,"\u0061":2}"#, r#"{"a":2}"#),
            (r#"{"1":1,"x":0,"\u0031":2}"#, r#"{"1":2,"x":0}"#),
            (
                r#"{"a":{"2":0,"1":0},"a":[{"b":1,"b":2}]}"#,
                r#"{"a":[{"b":2}]}"#,
            ),
            (
                r#"{"__proto__":1,"constructor":2}"#,
                r#"{"__proto__":1,"constructor":2}"#,
            ),
            (r#"{"":1,"":2}"#, r#"{"":2}"#),
            // scalars at top level
            ("true", "true"),
            (" null ", "null"),
            ("\"x\"", "\"x\""),
        ];
        for (input, expected) in cases {
            assert_eq!(canon(input), *expected, "input {input:?}");
        }
    }

    #[test]
    fn many_duplicate_keys_use_sorted_path() {
        // More than 16 members exercises the sort-based duplicate check.
        let mut input = String::from("{");
        for i in 0..40 {
            input.push_str(&format!("\"k{}\":{},", i % 20, i));
        }
        input.push_str("\"5\":true}");
        let mut expected = String::from("{\"5\":true");
        for i in 0..20 {
            expected.push_str(&format!(",\"k{}\":{}", i, i + 20));
        }
        expected.push('}');
        assert_eq!(canon(&input), expected);
    }

    #[test]
    fn deep_nesting() {
        let depth = MAX_DEPTH;
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(canon(&arrays), arrays);
        let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        assert_eq!(canon(&objects), objects);

        let too_deep = format!("{}{}", "[".repeat(depth + 1), "]".repeat(depth + 1));
        assert!(matches!(
            canonicalize(too_deep.as_bytes()),
            Err(JsonError::TooDeep { .. })
        ));
        // Hostile depth fails cleanly instead of overflowing the stack.
        let huge = "[".repeat(1_000_000);
        assert!(canonicalize(huge.as_bytes()).is_err());
    }

    #[test]
    fn rejects_what_json_parse_rejects() {
        let bad: &[&str] = &[
            "",
            " ",
            "[1,]",
            "{\"a\":1,}",
            "[,1]",
            "{,}",
            "// c\n1",
            "/* c */ 1",
            "[1] // c",
            "NaN",
            "Infinity",
            "-Infinity",
            "'a'",
            "{'a':1}",
            "{a:1}",
            "01",
            "-01",
            "00",
            "+1",
            ".5",
            "1.",
            "1.e5",
            "1e",
            "1e+",
            "-",
            "0x10",
            "1 2",
            "[1] x",
            "{} {}",
            "tru",
            "truex",
            "nul",
            "\"abc",
            "\"a\nb\"",
            "\"\t\"",
            "\"\\x41\"",
            "\"\\u12\"",
            "\"\\u12G4\"",
            "\"\\\"",
            "\"\\'\"",
            "[1 2]",
            "{\"a\" 1}",
            "{\"a\":}",
            "{1:2}",
            "[",
            "{",
            "{\"a\"",
            "]",
            "\u{a0}1",
            "\u{feff}1",
            "\u{2028}1",
            "\u{b}1",
        ];
        for input in bad {
            assert!(
                canonicalize(input.as_bytes()).is_err(),
                "{input:?} should be rejected"
            );
        }
    }

    #[test]
    fn rejects_bom_invalid_utf8_and_lone_surrogates() {
        let err = canonicalize(b"\xEF\xBB\xBF{}").unwrap_err();
        assert!(err.to_string().contains("byte order mark"), "{err}");

        assert_eq!(
            canonicalize(b"[\"\xff\"]"),
            Err(JsonError::InvalidUtf8 { offset: 2 })
        );

        for lone in [
            r#""\ud800""#,
            r#""\uDBFF x""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800\ud800""#,
            r#"{"\ud800":1}"#,
        ] {
            assert!(
                matches!(
                    canonicalize(lone.as_bytes()),
                    Err(JsonError::LoneSurrogate { .. })
                ),
                "{lone:?}"
            );
        }
    }

    #[test]
    fn error_positions_and_messages() {
        let err = canonicalize(b"{\n  \"a\": 1,\n  \"b\": tru\n}").unwrap_err();
        assert_eq!(
            err,
            JsonError::Malformed {
                line: 3,
                column: 8,
                reason: "expected a JSON value"
            }
        );
        assert_eq!(err.to_string(), "expected a JSON value at line 3, column 8");
        // Columns count characters, not bytes.
        let err = canonicalize("[\"é\",]".as_bytes()).unwrap_err();
        assert!(err.to_string().contains("line 1, column 6"), "{err}");
    }

    #[test]
    fn canonical_json_accessors() {
        let c = canonicalize(b" { \"a\" : 1 } ").unwrap();
        assert_eq!(c.as_str(), r#"{"a":1}"#);
        assert_eq!(c.len(), 7);
        assert!(c.is_object());
        assert!(!canonicalize(b"[{}]").unwrap().is_object());
        assert!(!canonicalize(b"\"{\"").unwrap().is_object());
        let stored = CanonicalJson::from_stored(r#"{"a":1}"#.to_owned());
        assert_eq!(stored, c);
        assert_eq!(c.into_string(), r#"{"a":1}"#);
    }

    // ---- property tests ------------------------------------------------

    fn arb_key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-c]{0,2}",
            "[0-9]{1,3}",
            Just("4294967294".to_owned()),
            Just("4294967295".to_owned()),
            Just("-1".to_owned()),
            any::<String>(),
        ]
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
                .map(Value::Number)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((arb_key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Same JSON data model as JS: all numbers are doubles, keys unordered.
    fn equivalent(a: &Value, b: &Value) -> bool {
        match (a, b) {
            // serde_json (without its float_roundtrip feature) may parse a
            // float a few ULP off, so allow a tiny relative error; exact
            // digits are checked by the table and against Node.
            (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) => p == q || (p - q).abs() <= p.abs().max(q.abs()) * 1e-12,
                _ => false,
            },
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equivalent(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .all(|(k, v)| y.get(k).is_some_and(|w| equivalent(v, w)))
            }
            _ => a == b,
        }
    }

    proptest! {
        #[test]
        fn idempotent_and_equivalent(v in arb_value()) {
            let compact = serde_json::to_string(&v).unwrap();
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            let c = canonicalize(compact.as_bytes()).unwrap();
            prop_assert_eq!(&canonicalize(pretty.as_bytes()).unwrap(), &c);
            prop_assert_eq!(&canonicalize(c.as_str().as_bytes()).unwrap(), &c);
            let back: Value = serde_json::from_str(c.as_str()).unwrap();
            prop_assert!(equivalent(&v, &back), "{} vs {}", compact, c);
        }

        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(c) = canonicalize(&bytes) {
                prop_assert_eq!(canonicalize(c.as_str().as_bytes()).unwrap(), c);
            }
        }

        #[test]
        fn never_panics_on_jsonish_text(s in r#"[\[\]{}",:0-9eE.+\- a-z\\u]{0,40}"#) {
            if let Ok(c) = canonicalize(s.as_bytes()) {
                prop_assert_eq!(canonicalize(c.as_str().as_bytes()).unwrap(), c);
            }
        }
    }

    // ---- differential test against Node --------------------------------

    /// Runs `node -e script` with `stdin`; None when node is unavailable
    /// (panics instead when `CI` is set, so CI cannot silently skip).
    fn run_node(script: &str, stdin: &str) -> Option<String> {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let child = Command::new("node")
            .arg("-e")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("skipping differential test: cannot run node ({e})");
                return None;
            }
            Err(e) => panic!("node is required when CI is set: {e}"),
        };
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(stdin.as_bytes()).expect("write to node");
        drop(pipe);
        let out = child.wait_with_output().expect("node output");
        assert!(out.status.success(), "node failed: {:?}", out.status);
        Some(String::from_utf8(out.stdout).expect("node prints UTF-8"))
    }

    /// Small deterministic PRNG (xorshift64*) so failures are reproducible.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    fn gen_ws(r: &mut Rng, out: &mut String) {
        if r.below(3) == 0 {
            for _ in 0..r.below(3) {
                out.push_str(r.pick(&[" ", "\n", "\t", "\r\n", "  "]));
            }
        }
    }

    fn gen_number(r: &mut Rng, out: &mut String) {
        const SPECIAL: &[&str] = &[
            "-0",
            "0.0",
            "-0.0",
            "1e21",
            "1e-7",
            "1e-6",
            "5e-324",
            "1e400",
            "-1e400",
            "1e-400",
            "123456789012345678901234567890",
            "9007199254740993",
            "0.1",
            "1E+2",
            "2.5e-5",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "4.9e-324",
            "2e-324",
            "0.30000000000000004",
            "100",
            "1e0",
            "-1E-0",
        ];
        if r.below(4) == 0 {
            out.push_str(r.pick(SPECIAL));
            return;
        }
        if r.below(2) == 0 {
            out.push('-');
        }
        if r.below(5) == 0 {
            out.push('0');
        } else {
            out.push(char::from(b'1' + r.below(9) as u8));
            for _ in 0..r.below(22) {
                out.push(char::from(b'0' + r.below(10) as u8));
            }
        }
        if r.below(2) == 0 {
            out.push('.');
            for _ in 0..1 + r.below(20) {
                out.push(char::from(b'0' + r.below(10) as u8));
            }
        }
        if r.below(3) == 0 {
            out.push_str(r.pick(&["e", "E", "e+", "e-", "E-"]));
            let max_exp = if r.below(4) == 0 { 400 } else { 30 };
            out.push_str(&r.below(max_exp).to_string());
        }
    }

    fn gen_string_body(r: &mut Rng, out: &mut String) {
        const PIECES: &[&str] = &[
            "a",
            "Z",
            "hello",
            " ",
            "/",
            "é",
            "😀",
            "\u{2028}",
            "\u{2029}",
            "\u{7f}",
            "\u{feff}",
            "中文",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\n",
            "\\r",
            "\\t",
            "\\u0000",
            "\\u001f",
            "\\u001F",
            "\\u007f",
            "\\u00e9",
            "\\u00E9",
            "\\u2028",
            "\\ud83d\\ude00",
            "\\uD83D\\uDE00",
            "\\uffff",
            "\\ufeff",
            "\\u0022",
            "\\u005c",
            "\\u0031",
            "0",
            "1",
        ];
        for _ in 0..r.below(5) {
            out.push_str(r.pick(PIECES));
        }
    }

    fn gen_key(r: &mut Rng, out: &mut String) {
        const KEYS: &[&str] = &[
            "a",
            "b",
            "c",
            "0",
            "1",
            "2",
            "10",
            "9",
            "01",
            "-1",
            "1.5",
            "4294967294",
            "4294967295",
            "4294967296",
            "9007199254740993",
            "__proto__",
            "constructor",
            "length",
            "",
            "\\u0031",
            "\\u0061",
            "é",
            "00",
            " 1",
        ];
        out.push('"');
        if r.below(4) == 0 {
            gen_string_body(r, out);
        } else {
            out.push_str(r.pick(KEYS));
        }
        out.push('"');
    }

    fn gen_value(r: &mut Rng, depth: usize, out: &mut String) {
        gen_ws(r, out);
        let container = depth > 0 && r.below(3) == 0;
        match (container, r.below(6)) {
            (true, k) if k < 3 => {
                out.push('[');
                gen_ws(r, out);
                for i in 0..r.below(6) {
                    if i > 0 {
                        out.push(',');
                    }
                    gen_value(r, depth - 1, out);
                }
                out.push(']');
            }
            (true, _) => {
                out.push('{');
                gen_ws(r, out);
                for i in 0..r.below(8) {
                    if i > 0 {
                        out.push(',');
                    }
                    gen_ws(r, out);
                    gen_key(r, out);
                    gen_ws(r, out);
                    out.push(':');
                    gen_value(r, depth - 1, out);
                }
                out.push('}');
            }
            (false, 0) => out.push_str(r.pick(&["null", "true", "false"])),
            (false, 1 | 2) => {
                out.push('"');
                gen_string_body(r, out);
                out.push('"');
            }
            (false, _) => gen_number(r, out),
        }
        gen_ws(r, out);
    }

    #[test]
    fn differential_against_node() {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        let mut docs: Vec<String> = (0..400)
            .map(|i| {
                let mut s = String::new();
                gen_value(&mut r, 1 + i % 5, &mut s);
                s
            })
            .collect();
        docs.push(format!(
            "{}{}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        ));
        let valid = docs.len();
        // Malformed inputs: node must reject them too.
        for bad in [
            "[1,]",
            "{\"a\":1,}",
            "01",
            "NaN",
            "'x'",
            "\u{feff}[]",
            "1 2",
            "\"\t\"",
        ] {
            docs.push(bad.to_owned());
        }

        let script = r#"
            const inputs = JSON.parse(require("fs").readFileSync(0, "utf8"));
            const outputs = inputs.map((s) => {
                try { return JSON.stringify(JSON.parse(s)); } catch (e) { return null; }
            });
            process.stdout.write(JSON.stringify(outputs));
        "#;
        let Some(stdout) = run_node(script, &serde_json::to_string(&docs).unwrap()) else {
            return;
        };
        let expected: Vec<Option<String>> = serde_json::from_str(&stdout).unwrap();
        assert_eq!(expected.len(), docs.len());
        // Every generated (non-malformed) document is valid JSON for Node,
        // so the comparison below really exercises the canonical output.
        assert!(expected[..valid].iter().all(Option::is_some));
        assert!(expected[valid..].iter().all(Option::is_none));
        for (doc, want) in docs.iter().zip(&expected) {
            let got = canonicalize(doc.as_bytes())
                .ok()
                .map(CanonicalJson::into_string);
            assert_eq!(&got, want, "input: {doc:?}");
        }
    }
}
