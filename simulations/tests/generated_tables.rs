//! The tables the documentation shows are written from the run: every row
//! has a cell per column, the figures are the rows' own, and `results.md`
//! is the report the run prints.

use simulations::algorithms::{self, Algorithm};
use simulations::generated::{self, main_row};
use simulations::workload::{self, SourcesSpec};
use simulations::{report, suite};

fn cells(line: &str) -> usize {
    // Escaped bars (`\|`) are text inside a cell, not separators.
    line.replace("\\|", "").trim_matches('|').split('|').count()
}

/// Every line of a Markdown table has the header's number of cells.
fn assert_rectangular(name: &str, table: &str) {
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert!(lines.len() > 2, "{name}: a header, a rule and rows");
    let width = cells(lines[0]);
    for line in &lines {
        assert_eq!(cells(line), width, "{name}: {line}");
    }
}

#[test]
fn every_table_is_written_from_the_rows_it_shows() {
    let workloads = vec![
        workload::poisson(3, 1.1, 2, 3),
        workload::steady(1.1, 3),
        workload::on_off(3, 2, 5.0, 10, 40, 3),
        workload::boundary_attack(4),
        workload::population(3, 50, 1.0, 5.0, 3),
        workload::sources(3, &SourcesSpec::new(500, 3)),
    ];
    let jobs = suite::jobs(&workloads, &algorithms::all());
    let rows = suite::run(&workloads, &jobs, 2, &|_| {}).unwrap();
    let report = report::markdown(&workloads, &rows);

    let dir = std::env::temp_dir().join(format!("generated-tables-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let written = generated::write_all(&dir, &report, &workloads, &rows).unwrap();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let names = [
        "results.md",
        "algorithm-table.md",
        "choose-table.md",
        "cloudflare-table.md",
        "sub-windows-table.md",
    ];
    assert_eq!(written.len(), names.len(), "{written:?}");
    assert_eq!(read("results.md"), report);
    for name in &names[1..] {
        assert_rectangular(name, &read(name));
    }

    // A cell of each table is the row's own figure.
    let sliding_4 = Algorithm::SlidingWindow { sub_windows: 4 };
    let poisson = &main_row(&workloads, &rows, "poisson-1.1x", sliding_4)
        .unwrap()
        .outcome
        .metrics;
    let choose = read("choose-table.md");
    let line = choose.lines().find(|l| l.contains("n = 4")).unwrap();
    assert!(
        line.contains(&format!(
            "| {:.2}, {:.2}, {:.2} |",
            poisson.over_limit_pct, poisson.peak, poisson.mean_diff_pct
        )),
        "{line}"
    );
    let sources = main_row(&workloads, &rows, "sources", sliding_4).unwrap();
    let strict = report::strict_of(&rows, sources).unwrap();
    let cloudflare = read("cloudflare-table.md");
    let line = cloudflare
        .lines()
        .find(|l| l.starts_with("| wrongly allowed + wrongly denied | allowed with"))
        .unwrap();
    let column: Vec<&str> = line.trim_matches('|').split(" | ").collect();
    assert_eq!(
        column[4].trim(),
        format!(
            "{:.3}% + {:.3}%",
            strict.wrongly_allowed_pct, strict.wrongly_denied_pct
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // A run without the workloads a table needs writes no such table.
    let some = vec![workload::poisson(3, 1.1, 2, 3)];
    let jobs = suite::jobs(&some, &algorithms::all());
    let rows = suite::run(&some, &jobs, 2, &|_| {}).unwrap();
    let dir = std::env::temp_dir().join(format!("generated-tables-some-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let written = generated::write_all(&dir, "report", &some, &rows).unwrap();
    let written: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, ["results.md", "sub-windows-table.md"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
