//! The grammar of docs/expressions.md, "Syntax": fields and items read into an [`Expression`], and the
//! typed errors for everything the grammar rejects ("What is rejected"). Whether an expression ever fires
//! is the schedule's question, asked by `Schedule::parse`.

use std::ops::Range;

use crate::expression::{Expression, FieldValues, YEAR_ORIGIN, Years};
use crate::{Error, Field};

/// Every field, in the order a 7-field expression writes them.
const FIELDS: [Field; 7] = [
    Field::Second,
    Field::Minute,
    Field::Hour,
    Field::DayOfMonth,
    Field::Month,
    Field::DayOfWeek,
    Field::Year,
];

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// The macros of Vixie cron and what they stand for.
const MACROS: [(&str, Option<&str>); 9] = [
    ("@yearly", Some("0 0 1 1 *")),
    ("@annually", Some("0 0 1 1 *")),
    ("@monthly", Some("0 0 1 * *")),
    ("@weekly", Some("0 0 * * 0")),
    ("@daily", Some("0 0 * * *")),
    ("@midnight", Some("0 0 * * *")),
    ("@hourly", Some("0 * * * *")),
    ("@reboot", None),
    ("@every", None),
];

/// Reads a 5-, 6- or 7-field expression; the first field that breaks the grammar is the error.
pub(crate) fn parse(expression: &str) -> Result<Expression, Error> {
    // Up to 8 field spans; `count` keeps counting past 8 for the error message.
    let mut spans = [(0usize, 0usize); 8];
    let mut count = 0;
    let bytes = expression.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if is_blank(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_blank(bytes[i]) {
            i += 1;
        }
        if count < spans.len() {
            spans[count] = (start, i);
        }
        count += 1;
    }
    // The expression without its surrounding blanks.
    let whole = if count == 0 {
        0..expression.len()
    } else {
        spans[0].0..last_end(bytes)
    };

    if count > 0 && bytes[spans[0].0] == b'@' {
        let (start, end) = spans[0];
        let text = &expression[start..end];
        let suggestion = MACROS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
            .and_then(|(_, s)| s.map(str::to_owned));
        return Err(Error::Macro {
            text: text.to_owned(),
            suggestion,
            span: start..end,
        });
    }
    if !(5..=7).contains(&count) {
        return Err(Error::FieldCount {
            found: count,
            span: whole,
        });
    }

    // 5 fields start at the minute, 6 and 7 at the second.
    let layout = if count == 5 {
        &FIELDS[1..6]
    } else {
        &FIELDS[..count]
    };
    let (mut second, mut year) = (None, None);
    let mut minute = FieldValues::NONE;
    let mut hour = FieldValues::NONE;
    let mut day_of_month = FieldValues::NONE;
    let mut month = FieldValues::NONE;
    let mut day_of_week = FieldValues::NONE;
    // In the order they are written, so that the first wrong field is the one reported.
    for (&field, &(start, end)) in layout.iter().zip(&spans) {
        let read = parse_field(expression, field, start, end)?;
        let values = FieldValues {
            bits: read.bits[0],
            plain: read.plain,
            star: read.star,
        };
        match field {
            Field::Second => second = Some(values),
            Field::Minute => minute = values,
            Field::Hour => hour = values,
            Field::DayOfMonth => day_of_month = values,
            Field::Month => month = values,
            Field::DayOfWeek => day_of_week = values,
            Field::Year => year = Some(read.bits),
        }
    }
    Ok(Expression {
        span: whole,
        second,
        minute,
        hour,
        day_of_month,
        month,
        day_of_week,
        year,
    })
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn last_end(bytes: &[u8]) -> usize {
    bytes.len() - bytes.iter().rev().take_while(|&&b| is_blank(b)).count()
}

/// One field as its items are read: the values in the width of a year field.
struct Read {
    /// Bit `value` (bit `value - YEAR_ORIGIN` for a year) per allowed value.
    bits: Years,
    /// Every item is a single number.
    plain: bool,
    /// The field's text starts with `*`.
    star: bool,
}

fn parse_field(expr: &str, field: Field, start: usize, end: usize) -> Result<Read, Error> {
    let mut parsed = Read {
        bits: [0; 3],
        plain: true,
        star: expr.as_bytes()[start] == b'*',
    };
    let bytes = expr.as_bytes();
    let mut item_start = start;
    loop {
        let mut item_end = item_start;
        while item_end < end && bytes[item_end] != b',' {
            item_end += 1;
        }
        if item_start == item_end {
            // Point at the comma that has no item on one side: the one after the empty item, or the
            // trailing one.
            let comma = if item_end < end {
                item_end
            } else {
                item_start - 1
            };
            return Err(Error::EmptyItem {
                field,
                text: expr[start..end].to_owned(),
                span: comma..comma + 1,
            });
        }
        parse_item(expr, field, item_start, item_end, &mut parsed)?;
        if item_end == end {
            return Ok(parsed);
        }
        item_start = item_end + 1;
    }
}

/// Field bounds as `u64`, and the largest value `*` and `N/S` reach (6 for day-of-week).
fn limits(field: Field) -> (u64, u64, u64) {
    let (min, max) = field.bounds();
    let top = if field == Field::DayOfWeek { 6 } else { max };
    (u64::from(min), u64::from(max), u64::from(top))
}

fn parse_item(
    expr: &str,
    field: Field,
    start: usize,
    end: usize,
    parsed: &mut Read,
) -> Result<(), Error> {
    let bytes = &expr.as_bytes()[start..end];
    if !bytes
        .iter()
        .all(|b| b.is_ascii_digit() || matches!(b, b'*' | b'-' | b'/'))
    {
        return Err(unsupported(expr, field, start, end));
    }
    let invalid = || Error::Invalid {
        field,
        text: expr[start..end].to_owned(),
        span: start..end,
    };
    let (min, max, top) = limits(field);
    let mut pos = 0;
    // Reads a number at `pos`, saturating (an out-of-range value is reported with its own span).
    let number = |pos: &mut usize| -> Option<(u64, Range<usize>)> {
        let from = *pos;
        let mut value: u64 = 0;
        while *pos < bytes.len() && bytes[*pos].is_ascii_digit() {
            value = value
                .saturating_mul(10)
                .saturating_add(u64::from(bytes[*pos] - b'0'));
            *pos += 1;
        }
        (*pos > from).then_some((value, start + from..start + *pos))
    };
    let check = |(value, span): (u64, Range<usize>)| -> Result<u64, Error> {
        if value < min || value > max {
            return Err(Error::OutOfRange {
                field,
                text: expr[span.clone()].to_owned(),
                min: min as u32,
                max: max as u32,
                span,
            });
        }
        Ok(value)
    };

    let (lo, hi, single) = if bytes.first() == Some(&b'*') {
        pos = 1;
        (min, top, false)
    } else {
        let first = check(number(&mut pos).ok_or_else(invalid)?)?;
        if bytes.get(pos) == Some(&b'-') {
            pos += 1;
            let last = check(number(&mut pos).ok_or_else(invalid)?)?;
            if first > last {
                let range = &expr[start..start + pos];
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                return Err(Error::ReversedRange {
                    field,
                    text: range.to_owned(),
                    suggestion: format!("{}-{}", trim_zeros(b), trim_zeros(a)),
                    span: start..start + pos,
                });
            }
            (first, last, false)
        } else {
            (first, first, true)
        }
    };
    let stepped = bytes.get(pos) == Some(&b'/');
    let (hi, step) = if stepped {
        pos += 1;
        let (step, _) = number(&mut pos).ok_or_else(invalid)?;
        if step == 0 {
            return Err(Error::ZeroStep {
                field,
                text: expr[start..end].to_owned(),
                span: start..end,
            });
        }
        // `N/S` runs to the field's top (`7/S` in day-of-week is just Sunday).
        (if single { top.max(lo) } else { hi }, step)
    } else {
        (hi, 1)
    };
    if pos != bytes.len() {
        return Err(invalid());
    }
    if !single || stepped {
        parsed.plain = false;
    }
    let base = if field == Field::Year {
        u64::from(YEAR_ORIGIN)
    } else {
        0
    };
    set_values(&mut parsed.bits, lo - base, hi - base, step);
    Ok(())
}

/// Sets the bits `lo, lo + step, …` up to `hi` (all below 192).
fn set_values(bits: &mut Years, lo: u64, hi: u64, step: u64) {
    if step == 1 {
        for (w, word) in bits.iter_mut().enumerate() {
            let (from, to) = (lo.max(w as u64 * 64), hi.min(w as u64 * 64 + 63));
            if from <= to {
                let (from, to) = (from % 64, to % 64);
                *word |= (u64::MAX >> (63 - to)) & (u64::MAX << from);
            }
        }
        return;
    }
    let mut v = lo;
    loop {
        bits[(v / 64) as usize] |= 1 << (v % 64);
        if hi - v < step {
            return;
        }
        v += step;
    }
}

fn trim_zeros(number: &str) -> &str {
    let trimmed = number.trim_start_matches('0');
    if trimmed.is_empty() { "0" } else { trimmed }
}

/// The error for an item with characters outside `0-9 * - /`: other dialects' syntax, or garbage.
fn unsupported(expr: &str, field: Field, start: usize, end: usize) -> Error {
    let text = &expr[start..end];
    let span = start..end;
    let unsupported = |suggestion: Option<String>| Error::Unsupported {
        field,
        text: text.to_owned(),
        suggestion,
        span: span.clone(),
    };
    if text == "?" {
        return unsupported(Some("*".to_owned()));
    }
    if text.contains(['?', '#']) {
        return unsupported(None);
    }
    // Names (`JAN`, `mon-fri`): suggest the numbers when every word is a name this field knows.
    let mut suggestion = String::new();
    let mut all_names = true;
    let mut any_name = false;
    let mut any_lw = false;
    let mut garbage = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_alphabetic() {
            let len = rest
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(rest.len());
            let word = rest[..len].to_ascii_uppercase();
            let month = MONTHS.iter().position(|m| *m == word);
            let weekday = WEEKDAYS.iter().position(|d| *d == word);
            any_name |= month.is_some() || weekday.is_some();
            any_lw |= matches!(word.as_str(), "L" | "W" | "LW");
            match (field, month, weekday) {
                (Field::Month, Some(m), _) => suggestion.push_str(&(m + 1).to_string()),
                (Field::DayOfWeek, _, Some(d)) => suggestion.push_str(&d.to_string()),
                _ => all_names = false,
            }
            rest = &rest[len..];
        } else {
            garbage |= !(c.is_ascii_digit() || matches!(c, '*' | '-' | '/'));
            suggestion.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    if garbage {
        return Error::Invalid {
            field,
            text: text.to_owned(),
            span,
        };
    }
    if any_name && all_names {
        return unsupported(Some(suggestion));
    }
    if any_name || any_lw {
        return unsupported(None);
    }
    Error::Invalid {
        field,
        text: text.to_owned(),
        span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_year_field_sets_bit_year_minus_its_origin() {
        let parsed = parse("0 0 0 1 1 * 1970,2099").unwrap();
        assert_eq!(parsed.year, Some([1, 0, 1 << (2099 - 1970 - 128)]));
    }
}
