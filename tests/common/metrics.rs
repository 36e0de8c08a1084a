//! Prometheus' text format, as the operators, JobSet, Kueue and the apiserver serve it on
//! `/metrics`: samples, their labels, sums over labels and histogram quantiles.

/// One sample of the Prometheus text format: the metric's name, labels and value.
pub type Sample<'a> = (&'a str, Vec<(String, String)>, f64);

/// The sample on a line of the text format (None: a comment, or not a sample).
pub fn parse_sample(line: &str) -> Option<Sample<'_>> {
    if line.starts_with('#') || line.is_empty() {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, labels)) = head.split_once('{') else {
        return Some((head, Vec::new(), value));
    };
    let labels = labels.strip_suffix('}')?;
    let mut out = Vec::new();
    let mut chars = labels.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut val = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => val.push(chars.next()?),
                '"' => break,
                c => val.push(c),
            }
        }
        out.push((key.trim_start_matches(',').to_string(), val));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Some((name, out, value))
}

/// The value of the label `key` (empty when it has none).
pub fn label<'a>(labels: &'a [(String, String)], key: &str) -> &'a str {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// Sum of the samples of `metric` whose labels hold every pair of `filter`.
pub fn sum_samples(text: &str, metric: &str, filter: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        if let Some((name, labels, value)) = parse_sample(line)
            && name == metric
            && filter.iter().all(|(k, v)| label(&labels, k) == *v)
        {
            *found.get_or_insert(0.0) += value;
        }
    }
    found
}

/// The p50 and p99 of Prometheus histogram `metric` (its `_bucket` samples), in ms, as the
/// upper bounds of the buckets they fall in.
pub fn histogram_p50_p99_ms(text: &str, metric: &str) -> Option<(f64, f64)> {
    let bucket = format!("{metric}_bucket");
    let mut buckets: Vec<(f64, f64)> = text
        .lines()
        .filter_map(parse_sample)
        .filter(|(name, _, _)| *name == bucket)
        .filter_map(|(_, labels, count)| {
            let le = label(&labels, "le");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let at = |q: f64| {
        buckets
            .iter()
            .find(|(_, c)| *c >= q * total)
            .map(|(le, _)| le * 1000.0)
    };
    Some((at(0.5)?, at(0.99)?))
}
