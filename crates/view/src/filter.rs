//! Filters of `MNT/<topic>/where/<filter>/`: the grammar of one path component and its
//! evaluation over a record. Pure: no I/O, no knowledge of where records come from.
//!
//! # Grammar
//!
//! A filter is one path component (at most [`MAX_FILTER_BYTES`] bytes): conditions joined by
//! `,`, all of which must hold; alternatives of such conditions joined by `,or,`, one of which
//! must hold (`user=a,or,user=b,qty>2` is `user=a` or (`user=b` and `qty>2`)). A condition is
//! `FIELD OP VALUE`:
//! - `OP` is the first operator in the condition: `=`, `!=`, `<`, `<=`, `>`, `>=`, `~`
//!   (contains), `!~` (does not contain);
//! - `FIELD` is a dotted path into the value read as JSON (`user`, `address.city`,
//!   `items.0.sku`: a segment of digits also indexes an array), or `@key`, `@value` (the whole
//!   value as bytes) or `@header.<name>`;
//! - `VALUE` is what follows the operator, possibly empty.
//!
//! In `FIELD` and `VALUE`, `%XX` (two hex digits) stands for the byte `XX`: `/`, `,` and `%`
//! must be written `%2F`, `%2C`, `%25`, and a `.` inside a JSON key name `%2E` (any other byte
//! may be too, `=` in a field name as `%3D`). A filter that does not parse is refused naming the
//! byte where it went wrong ([`FilterError`]).
//!
//! Patterns, after `=` and `!=` only: in `VALUE`, `%*` stands for any run of characters and
//! `%?` for any one character (a glob: `user=user-4%*` is a prefix), and a `VALUE` that starts
//! with `%re:` is a regular expression (the `regex` crate's syntax, unanchored, percent-decoded
//! first: `user=%re:^user-4[0-9]$`). A pattern is compared with a string field's content, any
//! other JSON field's compact text, or the bytes of `@key`, `@value`, a header.
//!
//! These extensions use only spellings that did not parse before (`,or,` holds no operator,
//! `!` was only valid before `=`, `%` only before two hex digits), so no filter that parsed
//! changed meaning.
//!
//! # What matches
//!
//! - A JSON field: the value (or, for a record a schema decodes, the JSON its `.json` line
//!   shows) is parsed as JSON and the path followed; a value that is not JSON, or lacks the
//!   field, matches no condition on that field (`!=` included). Then `VALUE` is compared as a
//!   number when it and the field are numbers (integers exactly, others as `f64`), as JSON
//!   `true`/`false`/`null` when it is that literal (equal only to that JSON value; `<`, `>`,
//!   `~` and `!~` never hold), and as a string otherwise: a string field by its content, any other field
//!   by its compact JSON text. Strings order by bytes. `~` holds when the field's text contains
//!   `VALUE`, `!~` when it does not.
//! - `@key`, `@value`, `@header.<name>`: the bytes themselves; a null key or value (and a header
//!   with a null value) equals only the literal `null`. `=` and `!=` compare bytes; an ordering
//!   compares as numbers when both sides are numbers, by bytes otherwise. A header condition holds when some header of that
//!   name satisfies it; a record without one matches no condition on it.
//!
//! # Filter before parse
//!
//! Most records of a selective filter are rejected without parsing them: a condition on a JSON
//! field needs the field's key, quoted (`"user"`), somewhere in the value's bytes, and an
//! equality with a string (or a `~`) needs the string itself; a value without them cannot match
//! ([`Filter::matches`] checks this with `memchr::memmem` before parsing). The check is exact,
//! not a heuristic: it is skipped for a value holding a `\` (a JSON escape could spell the same
//! text with other bytes), and made only for literals whose bytes every JSON spelling of a match
//! contains.

use std::cmp::Ordering;

use memchr::memmem;
use serde_json::{Number, Value};
use topicfs_format::Record;

/// Longest filter: one path component (`NAME_MAX`).
pub const MAX_FILTER_BYTES: usize = 255;

/// Why a filter does not parse: the byte where it went wrong and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// Byte position in the filter's text.
    pub at: usize,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at byte {}: {}", self.at, self.why)
    }
}

/// How a filter served one partition on this mount: records it looked at and records it kept,
/// counted as renderings evaluate it (a record rendered for a size and again for a read counts
/// twice). Shown in the filtered partition's `info`.
#[derive(Debug, Default)]
pub struct FilterStats {
    examined: std::sync::atomic::AtomicU64,
    matched: std::sync::atomic::AtomicU64,
}

impl FilterStats {
    /// Counts one evaluation and its outcome.
    pub fn count(&self, kept: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        self.examined.fetch_add(1, Relaxed);
        if kept {
            self.matched.fetch_add(1, Relaxed);
        }
    }

    /// (records examined, records matched) so far.
    pub fn get(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.examined.load(Relaxed), self.matched.load(Relaxed))
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `~`: contains.
    Contains,
    /// `!~`: does not contain.
    NotContains,
}

impl Op {
    /// Whether the operator holds for an ordering of field against value.
    fn holds(self, ord: Ordering) -> bool {
        match self {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Contains | Op::NotContains => false,
        }
    }
}

/// What a condition looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    /// A path into the value read as JSON (keys, or array indexes for digit segments).
    Json(Vec<String>),
    /// `@key`.
    Key,
    /// `@value`.
    Value,
    /// `@header.<name>`.
    Header(Vec<u8>),
}

/// `VALUE`, with what it also reads as.
#[derive(Clone, Debug, PartialEq)]
pub struct Literal {
    /// The decoded bytes.
    pub bytes: Vec<u8>,
    /// The number it spells, if it is JSON number syntax.
    pub number: Option<Number>,
    /// The JSON literal it is, if it is `true`, `false` or `null`.
    pub json: Option<Value>,
    /// The pattern it is (a glob with `%*`/`%?`, or `%re:`), if any: then `number` and `json`
    /// are `None` and `bytes` is the text as written after percent decoding.
    pub pattern: Option<Pattern>,
}

/// A `VALUE` that is a pattern: a glob (`%*`, `%?`) or a regular expression (`%re:`), compiled
/// once into a byte regex (so it applies to bytes that are not UTF-8 too).
#[derive(Clone, Debug)]
pub struct Pattern {
    /// The compiled expression (a glob: anchored at both ends).
    regex: regex::bytes::Regex,
}

impl Pattern {
    /// Whether `bytes` matches.
    pub fn is_match(&self, bytes: &[u8]) -> bool {
        self.regex.is_match(bytes)
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.regex.as_str() == other.regex.as_str()
    }
}

/// One condition.
#[derive(Clone, Debug)]
pub struct Condition {
    pub field: Field,
    pub op: Op,
    pub value: Literal,
    /// Byte strings every JSON text of a matching value contains (see the module docs), the
    /// most selective first, each with its searcher built once.
    needles: Vec<memmem::Finder<'static>>,
}

impl PartialEq for Condition {
    fn eq(&self, other: &Condition) -> bool {
        let needles = |c: &Condition| -> Vec<Vec<u8>> {
            c.needles.iter().map(|n| n.needle().to_vec()).collect()
        };
        (&self.field, self.op, &self.value) == (&other.field, other.op, &other.value)
            && needles(self) == needles(other)
    }
}

/// A parsed filter: one of its alternatives must hold, and each alternative holds when every
/// condition of it does.
///
/// **Invariant**: at least one alternative, and no alternative is empty.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    alternatives: Vec<Vec<Condition>>,
}

impl Filter {
    /// Parses one path component (see the module docs).
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        if text.len() > MAX_FILTER_BYTES {
            let why = format!("longer than {MAX_FILTER_BYTES} bytes ({})", text.len());
            return Err(FilterError { at: MAX_FILTER_BYTES, why });
        }
        if text.is_empty() {
            return Err(FilterError { at: 0, why: "an empty filter".into() });
        }
        let mut alternatives = vec![Vec::new()];
        let mut at = 0;
        for part in text.split(',') {
            if part == OR {
                if alternatives.last().is_none_or(Vec::is_empty) {
                    let why = "'or' with no condition before it".to_string();
                    return Err(FilterError { at, why });
                }
                alternatives.push(Vec::new());
            } else if let Some(last) = alternatives.last_mut() {
                last.push(parse_condition(part, at)?);
            }
            at += part.len() + 1;
        }
        if alternatives.last().is_none_or(Vec::is_empty) {
            let why = "'or' with no condition after it".to_string();
            return Err(FilterError { at: text.len(), why });
        }
        Ok(Filter { alternatives })
    }

    /// The conditions when the filter has one alternative (no `,or,`): all must hold. `None`
    /// for a filter of several alternatives (see [`Filter::alternatives`]).
    pub fn conditions(&self) -> Option<&[Condition]> {
        match self.alternatives.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }

    /// The alternatives, in the order written: one must hold, each holds when all its
    /// conditions do.
    pub fn alternatives(&self) -> &[Vec<Condition>] {
        &self.alternatives
    }

    /// Whether the filter reads the value as JSON (some condition is on a JSON field).
    pub fn reads_json(&self) -> bool {
        self.alternatives.iter().flatten().any(|c| matches!(c.field, Field::Json(_)))
    }

    /// Whether `record` matches: every condition holds. `json` is the text its JSON fields are
    /// read from: the record's value unless a schema decodes it (then the decoded JSON); `None`
    /// for a record that has no JSON (a null value, or one the schema cannot decode).
    pub fn matches(&self, record: &Record<'_>, json: Option<&[u8]>) -> bool {
        self.alternatives.iter().any(|conditions| all_hold(conditions, record, json))
    }
}

/// Whether every condition of `conditions` holds for `record` (see [`Filter::matches`]).
fn all_hold(conditions: &[Condition], record: &Record<'_>, json: Option<&[u8]>) -> bool {
    {
        // Cheap conditions and the byte-level check first, then one parse for every JSON field.
        let mut needs_parse = false;
        for c in conditions {
            match &c.field {
                Field::Json(_) => {
                    let Some(text) = json else { return false };
                    if !c.needles.is_empty() && memchr::memchr(b'\\', text).is_none() {
                        let absent = c.needles.iter().any(|n| n.find(text).is_none());
                        if absent {
                            return false;
                        }
                    }
                    needs_parse = true;
                }
                Field::Key => {
                    if !c.holds_for_bytes(record.key) {
                        return false;
                    }
                }
                Field::Value => {
                    if !c.holds_for_bytes(record.value) {
                        return false;
                    }
                }
                Field::Header(name) => {
                    let mut values = record.headers.iter().filter(|h| h.key == name.as_slice());
                    if !values.any(|h| c.holds_for_bytes(h.value)) {
                        return false;
                    }
                }
            }
        }
        if !needs_parse {
            return true;
        }
        let Some(text) = json else { return false };
        // Each field read on its own, without building the document (most filters have one).
        conditions.iter().all(|c| match &c.field {
            Field::Json(path) => {
                extract::field(text, path).ok().flatten().is_some_and(|v| c.holds_for_json(&v))
            }
            _ => true,
        })
    }
}

#[cfg(test)]
impl Filter {
    /// The same filter without its byte-level check: what it must agree with.
    fn without_prefilter(&self) -> Filter {
        let mut f = self.clone();
        for c in f.alternatives.iter_mut().flatten() {
            c.needles.clear();
        }
        f
    }
}

impl Condition {
    /// The condition over bytes (`@key`, `@value`, a header's value); `None` is null.
    pub(crate) fn holds_for_bytes(&self, bytes: Option<&[u8]>) -> bool {
        let Some(bytes) = bytes else {
            let null = self.value.json == Some(Value::Null);
            return match self.op {
                Op::Eq => null,
                Op::Ne => !null,
                _ => false,
            };
        };
        if let Some(holds) = self.holds_for_text(bytes) {
            return holds;
        }
        // `=` and `!=` by bytes; an ordering by number when both sides are numbers.
        let number = match self.op {
            Op::Eq | Op::Ne => None,
            _ => std::str::from_utf8(bytes).ok().and_then(parse_number),
        };
        let ord = match (number, &self.value.number) {
            (Some(field), Some(value)) => compare_numbers(&field, value),
            _ => bytes.cmp(self.value.bytes.as_slice()),
        };
        self.op.holds(ord)
    }

    /// The condition over a JSON field's value.
    pub(crate) fn holds_for_json(&self, field: &Value) -> bool {
        if let Some(literal) = &self.value.json {
            return match self.op {
                Op::Eq => field == literal,
                Op::Ne => field != literal,
                _ => false,
            };
        }
        if let (Value::Number(field), Some(value)) = (field, &self.value.number)
            && !matches!(self.op, Op::Contains | Op::NotContains)
        {
            return self.op.holds(compare_numbers(field, value));
        }
        let text: std::borrow::Cow<'_, str> = match field {
            Value::String(s) => s.as_str().into(),
            other => other.to_string().into(),
        };
        if let Some(holds) = self.holds_for_text(text.as_bytes()) {
            return holds;
        }
        self.op.holds(text.as_bytes().cmp(self.value.bytes.as_slice()))
    }

    /// The condition over a text when it is decided by the text alone, whatever its kind (a
    /// pattern, `~`, `!~`); `None` when it compares.
    fn holds_for_text(&self, text: &[u8]) -> Option<bool> {
        if let Some(pattern) = &self.value.pattern {
            return Some(pattern.is_match(text) == (self.op == Op::Eq));
        }
        match self.op {
            Op::Contains => Some(memmem::find(text, &self.value.bytes).is_some()),
            Op::NotContains => Some(memmem::find(text, &self.value.bytes).is_none()),
            _ => None,
        }
    }
}

/// The value at `path` in `doc`: object keys, or array indexes for digit segments (what
/// `extract::field` finds without building `doc`; the tests compare them).
#[cfg(test)]
fn lookup<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, segment| match v {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => items.get(segment.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Orders two JSON numbers: exactly when both are integers, as `f64` otherwise.
fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        return a.cmp(&b);
    }
    if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
        return a.cmp(&b);
    }
    let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// `text` as a JSON number, when it is exactly JSON number syntax.
fn parse_number(text: &str) -> Option<Number> {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |from: usize| b.iter().skip(from).take_while(|c| c.is_ascii_digit()).count();
    let int = digits(i);
    if int == 0 || (int > 1 && b.get(i) == Some(&b'0')) {
        return None;
    }
    i += int;
    if b.get(i) == Some(&b'.') {
        let frac = digits(i + 1);
        if frac == 0 {
            return None;
        }
        i += 1 + frac;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp = digits(i);
        if exp == 0 {
            return None;
        }
        i += exp;
    }
    if i != b.len() {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// Decodes `%XX` escapes of `text`, which starts at byte `at` of the filter.
fn percent_decode(text: &str, at: usize) -> Result<Vec<u8>, FilterError> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        let byte = hex.filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
        let Some(byte) = byte.and_then(|h| u8::from_str_radix(h, 16).ok()) else {
            let why = "'%' not followed by two hex digits (write '%' as %25)".to_string();
            return Err(FilterError { at: at + i, why });
        };
        out.push(byte);
        i += 3;
    }
    Ok(out)
}

/// [`percent_decode`] of a name (a JSON key or a header name), which must be UTF-8 text for a
/// JSON key.
fn decode_name(text: &str, at: usize, what: &str) -> Result<String, FilterError> {
    if text.is_empty() {
        return Err(FilterError { at, why: format!("an empty {what}") });
    }
    String::from_utf8(percent_decode(text, at)?)
        .map_err(|_| FilterError { at, why: format!("{what} is not UTF-8 once decoded") })
}

/// Parses one condition, `part`, which starts at byte `at` of the filter.
fn parse_condition(part: &str, at: usize) -> Result<Condition, FilterError> {
    let b = part.as_bytes();
    let Some(op_at) = b.iter().position(|c| b"=<>!~".contains(c)) else {
        let why = if part.is_empty() {
            "an empty condition (two ',' in a row, or one at an end)".to_string()
        } else {
            format!("no operator in {part:?} (one of = != < <= > >= ~ !~)")
        };
        return Err(FilterError { at, why });
    };
    let next_is_eq = b.get(op_at + 1) == Some(&b'=');
    let (op, len) = match b.get(op_at) {
        Some(b'=') => (Op::Eq, 1),
        Some(b'~') => (Op::Contains, 1),
        Some(b'!') if next_is_eq => (Op::Ne, 2),
        Some(b'!') if b.get(op_at + 1) == Some(&b'~') => (Op::NotContains, 2),
        Some(b'<') if next_is_eq => (Op::Le, 2),
        Some(b'<') => (Op::Lt, 1),
        Some(b'>') if next_is_eq => (Op::Ge, 2),
        Some(b'>') => (Op::Gt, 1),
        _ => {
            let why = "'!' not followed by '=' or '~' (write '!' in a name as %21)".to_string();
            return Err(FilterError { at: at + op_at, why });
        }
    };
    let (name, rest) = (&part[..op_at], &part[op_at + len..]);
    if name.is_empty() {
        return Err(FilterError { at, why: "no field before the operator".into() });
    }
    let field = parse_field(name, at)?;
    let value_at = at + op_at + len;
    if let Some(pattern) = parse_pattern(rest, value_at)? {
        if !matches!(op, Op::Eq | Op::Ne) {
            let why = "a pattern (%*, %? or %re:) is compared with = or != only".to_string();
            return Err(FilterError { at: value_at, why });
        }
        let bytes = pattern_text(rest);
        let value = Literal { bytes, number: None, json: None, pattern: Some(pattern) };
        let needles = needles(&field, op, &value);
        let needles = needles.into_iter().map(|n| memmem::Finder::new(&n).into_owned());
        return Ok(Condition { field, op, value, needles: needles.collect() });
    }
    let bytes = percent_decode(rest, value_at)?;
    let text = std::str::from_utf8(&bytes).ok();
    let number = text.and_then(parse_number);
    let json = match text {
        Some("true") => Some(Value::Bool(true)),
        Some("false") => Some(Value::Bool(false)),
        Some("null") => Some(Value::Null),
        _ => None,
    };
    let value = Literal { bytes, number, json, pattern: None };
    let needles =
        needles(&field, op, &value).into_iter().map(|n| memmem::Finder::new(&n).into_owned());
    Ok(Condition { field, op, value, needles: needles.collect() })
}

/// Parses `FIELD`, which starts at byte `at` of the filter.
fn parse_field(name: &str, at: usize) -> Result<Field, FilterError> {
    if let Some(special) = name.strip_prefix('@') {
        return match special {
            "key" => Ok(Field::Key),
            "value" => Ok(Field::Value),
            _ => match special.strip_prefix("header.") {
                Some(header) if !header.is_empty() => {
                    Ok(Field::Header(percent_decode(header, at + "@header.".len())?))
                }
                _ => Err(FilterError {
                    at,
                    why: format!("unknown {name:?} (@key, @value or @header.NAME)"),
                }),
            },
        };
    }
    let mut path = Vec::new();
    let mut segment_at = at;
    for segment in name.split('.') {
        path.push(decode_name(segment, segment_at, "field name segment")?);
        segment_at += segment.len() + 1;
    }
    Ok(Field::Json(path))
}

/// The byte strings every JSON text of a value matching `field op value` contains, when no
/// escape is in the text (see the module docs): the value's first (rarer than a key name).
fn needles(field: &Field, op: Op, value: &Literal) -> Vec<Vec<u8>> {
    let Field::Json(path) = field else { return Vec::new() };
    let mut out = value_needle(op, value).into_iter().collect::<Vec<_>>();
    // The last key of the path, quoted as JSON writes it (a digit segment may be an index).
    if let Some(key) = path.iter().rev().find(|s| !s.bytes().all(|c| c.is_ascii_digit())) {
        let quoted = Value::String(key.clone()).to_string();
        if !quoted.contains('\\') {
            out.push(quoted.into_bytes());
        }
    }
    out
}

/// What every JSON text holding a field that satisfies `op value` contains, if anything.
fn value_needle(op: Op, value: &Literal) -> Option<Vec<u8>> {
    if value.pattern.is_some() {
        return None;
    }
    let text = std::str::from_utf8(&value.bytes).ok()?;
    let plain = value.number.is_none() && value.json.is_none();
    let quoted = Value::String(text.to_string()).to_string();
    Some(match op {
        // A string equal to VALUE: only a string field can be (another field's text starts
        // with a digit, '-', '[', '{', 't', 'f' or 'n' and is then a number or a literal, or
        // an array or object, which VALUE's first byte rules out).
        Op::Eq if plain && !text.starts_with(['[', '{']) && !quoted.contains('\\') => {
            quoted.into_bytes()
        }
        // Text containing VALUE: inside a string, a key or a literal token, spelled the same
        // in the raw text, unless VALUE holds bytes a compact rendering spells differently
        // (structure, or what could be part of a number).
        Op::Contains
            if !text.is_empty()
                && !quoted.contains('\\')
                && !text.bytes().any(|c| b"[]{}:,\" ".contains(&c))
                && !text.bytes().all(|c| b"0123456789.-+eE".contains(&c)) =>
        {
            text.as_bytes().to_vec()
        }
        _ => return None,
    })
}

/// The condition-free part that separates a filter's alternatives.
const OR: &str = "or";
/// What starts a `VALUE` that is a regular expression.
const REGEX_MARK: &str = "%re:";
/// Largest compiled pattern (the `regex` crate's size limit): a filter of 255 bytes stays far
/// below it unless it repeats counted groups, which is refused rather than compiled.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The pattern `rest` (a condition's `VALUE` as written, from byte `at` of the filter) is, if
/// any: a regular expression after [`REGEX_MARK`], or a glob when `%*` or `%?` occurs in it.
fn parse_pattern(rest: &str, at: usize) -> Result<Option<Pattern>, FilterError> {
    let source = if let Some(regex) = rest.strip_prefix(REGEX_MARK) {
        let decoded = percent_decode(regex, at + REGEX_MARK.len())?;
        let Ok(text) = String::from_utf8(decoded) else {
            let why = "a regular expression that is not UTF-8 once decoded".to_string();
            return Err(FilterError { at, why });
        };
        text
    } else {
        let Some(glob) = glob_regex(rest, at)? else { return Ok(None) };
        glob
    };
    let regex = regex::bytes::RegexBuilder::new(&source)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| FilterError { at, why: format!("not a regular expression: {e}") })?;
    Ok(Some(Pattern { regex }))
}

/// The anchored regular expression of the glob `rest` (from byte `at` of the filter), or
/// `None` when it holds no `%*` or `%?` (then it is a plain value).
fn glob_regex(rest: &str, at: usize) -> Result<Option<String>, FilterError> {
    let b = rest.as_bytes();
    let mut out = String::from("^");
    let mut wild = false;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match (c, b.get(i + 1)) {
            (b'%', Some(b'*')) => {
                out.push_str("(?s-u:.)*");
                wild = true;
                i += 2;
            }
            (b'%', Some(b'?')) => {
                out.push_str("(?s:.)");
                wild = true;
                i += 2;
            }
            (b'%', _) => {
                let hex = b.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let byte = hex.and_then(|h| std::str::from_utf8(h).ok());
                let Some(byte) = byte.and_then(|h| u8::from_str_radix(h, 16).ok()) else {
                    let why = "'%' not followed by two hex digits, '*' or '?' (write '%' as %25)";
                    return Err(FilterError { at: at + i, why: why.to_string() });
                };
                push_literal_byte(&mut out, byte);
                i += 3;
            }
            _ => {
                push_literal_byte(&mut out, c);
                i += 1;
            }
        }
    }
    out.push('$');
    Ok(wild.then_some(out))
}

/// Appends a regular expression matching exactly the byte `byte`.
fn push_literal_byte(out: &mut String, byte: u8) {
    if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
        out.push(char::from(byte));
    } else {
        out.push_str(&format!("(?-u:\\x{byte:02x})"));
    }
}

/// What a pattern's `bytes` hold: its text as written, `%XX` escapes decoded (the wildcards
/// and the regex mark are kept as written).
fn pattern_text(rest: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(rest.len());
    let b = rest.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let hex = b.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
        let byte = hex.and_then(|h| std::str::from_utf8(h).ok());
        match byte.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(byte) if c == b'%' => {
                out.push(byte);
                i += 3;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

pub(crate) mod extract;
#[cfg(test)]
mod tests;
