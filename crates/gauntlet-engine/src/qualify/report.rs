//! `qualification.md`: the report a reviewer reads first, rebuilt from `qualification.json` after every stage.

use std::fmt::Write as _;

use super::{Qualification, QualificationVerdict};

pub fn markdown(q: &Qualification) -> String {
    let mut md = String::new();
    let verdict = match q.verdict {
        QualificationVerdict::Running => "RUNNING (a stage is in progress or the run was killed)".to_owned(),
        v => v.as_str().to_uppercase(),
    };
    let _ = writeln!(md, "# Release qualification: {}\n", q.profile);
    let _ = writeln!(
        md,
        "- Verdict: **{verdict}**{}",
        if q.partial { " (partial: not every stage was selected)" } else { "" }
    );
    let _ = writeln!(md, "- Identity: `{}`", q.identity_digest);
    let _ = writeln!(md, "- Run: `{}` · gauntlet {}", q.run_id, q.gauntlet_version);
    let _ = writeln!(md, "- Server: `{}` at {}", q.command.join(" "), q.base_url);
    let _ =
        writeln!(md, "- Started: {} · Finished: {}", q.started_at, q.finished_at.as_deref().unwrap_or("in progress"));
    let _ = writeln!(
        md,
        "- Baseline: {}\n",
        q.baseline
            .as_deref()
            .map_or("none: R5 is recorded as candidate evidence, no performance gate applied".into(), |b| format!(
                "`{b}`"
            ))
    );
    let _ = writeln!(md, "| Stage | What | Status | Seconds | Summary | Evidence |");
    let _ = writeln!(md, "|---|---|---|---:|---|---|");
    for s in &q.stages {
        let secs = s.seconds.map_or(String::new(), |x| format!("{x:.1}"));
        let status = if s.timed_out {
            format!("{} (timed out)", s.status.as_str().to_uppercase())
        } else {
            s.status.as_str().to_uppercase()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | `{}` |",
            s.id,
            s.title,
            status,
            secs,
            crate::util::clean::line(&s.summary).replace('|', "\\|"),
            s.file
        );
    }
    let failing: Vec<_> = q.stages.iter().filter(|s| !s.failures.is_empty()).collect();
    if !failing.is_empty() {
        let _ = writeln!(md, "\n## Failures\n");
        for s in failing {
            for f in s.failures.iter().take(20) {
                let _ = writeln!(md, "- **{}** {}", s.id, crate::util::clean::line(&f.replace('\n', " ")));
            }
            if s.failures.len() > 20 {
                let _ = writeln!(md, "- **{}** … and {} more (see `{}`)", s.id, s.failures.len() - 20, s.file);
            }
        }
    }
    let _ = writeln!(
        md,
        "\nThe bundle is checked offline by `gauntlet verify DIR`. Promotion is a person's decision: \
         `gauntlet baseline promote` records it."
    );
    md
}
