//! Where a protobuf message that did not decode is damaged: the path of the field and the
//! byte. prost-reflect's decode errors say what (`buffer underflow`) but not where, so after
//! one this walks the wire format again with the descriptor. It runs only on an error.

use prost_reflect::{Kind, MessageDescriptor};

/// The nesting a walk follows (prost's decode limit).
const MAX_DEPTH: u32 = 100;

/// The first damage found in `buf`, a message of type `message` whose first byte is byte
/// `base` of what follows the schema id: `field items[1].sku at byte 12: ...`. `None` when the
/// walk finds nothing wrong (a damage it does not look for, such as inside a group).
pub(super) fn locate(message: &MessageDescriptor, buf: &[u8], base: usize) -> Option<String> {
    walk(message, buf, base, "", 0)
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

fn walk(
    message: &MessageDescriptor,
    buf: &[u8],
    base: usize,
    path: &str,
    depth: u32,
) -> Option<String> {
    if depth > MAX_DEPTH {
        let at = if path.is_empty() { "the message" } else { path };
        return Some(format!("{at} at byte {base}: nested deeper than {MAX_DEPTH}"));
    }
    let mut pos = 0;
    // How many times each field number was seen: the index of a repeated field's element.
    let mut seen: Vec<(u32, usize)> = Vec::new();
    while pos < buf.len() {
        let start = pos;
        let here = |what: &str, name: &str| {
            let at =
                if name.is_empty() { "the message".to_string() } else { format!("field {name}") };
            Some(format!("{at} at byte {}: {what}", base + start))
        };
        let Some(key) = varint(buf, &mut pos) else {
            return here("a truncated field key", path);
        };
        let (number, wire) = ((key >> 3) as u32, key & 7);
        if number == 0 || key >> 3 > u64::from(u32::MAX >> 3) {
            return here(&format!("field number {} is not valid", key >> 3), path);
        }
        let field = message.get_field(number);
        let index = match seen.iter_mut().find(|(n, _)| *n == number) {
            Some((_, count)) => {
                *count += 1;
                *count - 1
            }
            None => {
                seen.push((number, 1));
                0
            }
        };
        let name = match &field {
            Some(f) if f.is_list() || f.is_map() => {
                format!("{}[{index}]", join(path, f.json_name()))
            }
            Some(f) => join(path, f.json_name()),
            None => join(path, &format!("<unknown field {number}>")),
        };
        let expected = field
            .as_ref()
            .filter(|f| !f.is_group())
            .map(|f| (wire_type_of(&f.kind()), f.is_list()));
        match expected {
            Some((expected, is_list)) if expected != wire && !(is_list && wire == 2) => {
                return here(&format!("wire type {wire} where its type has {expected}"), &name);
            }
            _ => {}
        }
        match wire {
            0 => {
                if varint(buf, &mut pos).is_none() {
                    return here("a truncated varint", &name);
                }
            }
            1 | 5 => {
                let size = if wire == 1 { 8 } else { 4 };
                if buf.len() - pos < size {
                    return here(&format!("{size} bytes, {} left", buf.len() - pos), &name);
                }
                pos += size;
            }
            2 => {
                let Some(len) = varint(buf, &mut pos) else {
                    return here("a truncated length", &name);
                };
                let left = buf.len() - pos;
                let len = match usize::try_from(len) {
                    Ok(len) if len <= left => len,
                    _ => return here(&format!("length {len}, {left} bytes left"), &name),
                };
                let inner = buf.get(pos..pos + len).unwrap_or_default();
                match field.as_ref().map(|f| f.kind()) {
                    Some(Kind::Message(m)) => {
                        if let Some(found) = walk(&m, inner, base + pos, &name, depth + 1) {
                            return Some(found);
                        }
                    }
                    Some(Kind::String) if std::str::from_utf8(inner).is_err() => {
                        return here("a string that is not UTF-8", &name);
                    }
                    _ => {}
                }
                pos += len;
            }
            // Groups (proto2) are not followed.
            3 | 4 => return None,
            _ => return here(&format!("wire type {wire} does not exist"), &name),
        }
    }
    None
}

/// The wire type a field of `kind` is written with (its packed form aside; not a group).
fn wire_type_of(kind: &Kind) -> u64 {
    match kind {
        Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Bool
        | Kind::Enum(_) => 0,
        Kind::Fixed64 | Kind::Sfixed64 | Kind::Double => 1,
        Kind::Fixed32 | Kind::Sfixed32 | Kind::Float => 5,
        Kind::String | Kind::Bytes | Kind::Message(_) => 2,
    }
}

/// A base-128 varint of up to 10 bytes at `*pos`; `None` if truncated or longer.
fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}
