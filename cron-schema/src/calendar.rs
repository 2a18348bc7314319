//! Proleptic Gregorian calendar arithmetic on plain integers (Howard Hinnant's `days_from_civil`), so that
//! the engine never goes through chrono in its inner loop.

/// Seconds in a day.
pub(crate) const DAY: i64 = 86_400;

/// Days since 1970-01-01 of the date `y-m-d` (`m` in 1..=12, `d` in 1..=31).
#[inline]
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    // Unsigned arithmetic (cheaper divisions) for years from 0 on; Euclidean division before.
    let era = if y >= 0 { y / 400 } else { (y - 399) / 400 };
    let yoe = (y - era * 400) as u32;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + i64::from(doe) - 719_468
}

/// The date `(year, month, day)` of a number of days since 1970-01-01.
#[cfg(test)]
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 {
        z / 146_097
    } else {
        (z - 146_096) / 146_097
    };
    let doe = (z - era * 146_097) as u32;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = i64::from(yoe) + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[inline]
pub(crate) fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

#[inline]
pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    if m == 2 {
        28 + u32::from(is_leap(y))
    } else {
        30 + ((m + (m >> 3)) & 1)
    }
}

/// The day of the week of a number of days since 1970-01-01, 0 = Sunday.
#[inline]
pub(crate) fn weekday(days: i64) -> u32 {
    // 1970-01-01 was a Thursday.
    (days + 4).rem_euclid(7) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate};

    #[test]
    fn agrees_with_chrono() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for days in (-800_000..800_000).step_by(7) {
            let date = epoch + chrono::Duration::days(days);
            let (y, m, d) = civil_from_days(days);
            assert_eq!(
                (y, m, d),
                (i64::from(date.year()), date.month(), date.day())
            );
            assert_eq!(days_from_civil(y, m, d), days);
            assert_eq!(weekday(days), date.weekday().num_days_from_sunday());
        }
        for y in 1900..2200 {
            for m in 1..=12 {
                let first = NaiveDate::from_ymd_opt(y as i32, m, 1).unwrap();
                let next = if m == 12 {
                    NaiveDate::from_ymd_opt(y as i32 + 1, 1, 1).unwrap()
                } else {
                    NaiveDate::from_ymd_opt(y as i32, m + 1, 1).unwrap()
                };
                assert_eq!(i64::from(days_in_month(y, m)), (next - first).num_days());
            }
        }
    }
}
