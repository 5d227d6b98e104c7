//! `[profiles.P.qualify] quality.lm_eval` (issue 20 item 5): read strictly into typed settings, with paths kept
//! inside the manifest root and options that mean nothing together refused.

use std::path::Path;

use gauntlet_engine::manifest::{LmEval, Manifest, QualitySet};

fn manifest(quality: &str) -> String {
    format!(
        "version = 1\n[profiles.p]\nbase_url = \"http://127.0.0.1:8000\"\n[profiles.p.qualify]\nquality = {quality}\n"
    )
}

fn problems(root: &Path, quality: &str) -> Vec<String> {
    match Manifest::parse(&manifest(quality), "test.toml", root) {
        Ok(_) => panic!("expected `{quality}` to be refused"),
        Err(e) => e.problems,
    }
}

#[test]
fn lm_eval_quality_is_read_into_typed_settings_with_its_folder_inside_the_root() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("tasks/arith")).unwrap();
    let quality = "{ floor = 0.6, lm_eval = { tasks = [\"arith\", \"gsm8k_cot\"], limit = 5, include_path = \
                   \"tasks/arith\", metric = \"exact_match,strict-match\" } }";
    let m = Manifest::parse(&manifest(quality), "test.toml", root.path()).unwrap();
    let q = &m.profiles["p"].qualify.quality;
    assert_eq!(q.floor, 0.6);
    assert_eq!(
        q.set,
        QualitySet::LmEval(LmEval {
            tasks: vec!["arith".into(), "gsm8k_cot".into()],
            limit: Some(5),
            include_path: Some(root.path().join("tasks/arith")),
            metric: Some("exact_match,strict-match".into()),
        })
    );
    // Only the tasks are required.
    let m = Manifest::parse(&manifest("{ lm_eval = { tasks = [\"arith\"] } }"), "test.toml", root.path()).unwrap();
    let QualitySet::LmEval(lm) = &m.profiles["p"].qualify.quality.set else { panic!("not lm-eval") };
    assert_eq!((lm.limit, lm.include_path.as_deref(), lm.metric.as_deref()), (None, None, None));
}

#[test]
fn lm_eval_quality_refuses_typos_escapes_and_keys_that_mean_nothing_with_it() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let at = "profiles.p.qualify.quality.lm_eval";
    let has = |ps: &[String], want: &str| assert!(ps.iter().any(|p| p == want), "want `{want}` in {ps:?}");

    let ps = problems(r, "{ lm_eval = { taks = [\"a\"], limt = 3 } }");
    has(&ps, &format!("{at}.taks: unknown key; did you mean `tasks`?"));
    has(&ps, &format!("{at}.limt: unknown key; did you mean `limit`?"));
    has(&ps, &format!("{at}.tasks: required (the lm-eval task names R2 runs)"));

    let ps = problems(r, "{ lm_eval = { tasks = [\"a\"], include_path = \"../tasks\" } }");
    assert!(
        ps.iter().any(|p| p.starts_with(&format!("{at}.include_path: `../tasks` leaves the manifest root"))),
        "{ps:?}"
    );
    let ps = problems(r, "{ lm_eval = { tasks = [\"a\"], include_path = \"/etc\" } }");
    assert!(ps.iter().any(|p| p.starts_with(&format!("{at}.include_path: `/etc` must be relative"))), "{ps:?}");
    let ps = problems(r, "{ lm_eval = { tasks = [\"a\"], include_path = \"nowhere\" } }");
    assert!(
        ps.iter()
            .any(|p| p.starts_with(&format!("{at}.include_path: `")) && p.ends_with("is not a folder of task files")),
        "{ps:?}"
    );

    // Names that would split or become flags on lm-eval's command line; counts that are not counts.
    let ps = problems(r, "{ lm_eval = { tasks = [\"a,b\", \"--x\", 3], limit = 0, metric = \"acc =1\" } }");
    has(&ps, &format!("{at}.tasks[2]: expected a string, found an integer"));
    // `..` (issue 32 D7): a task name also names the bundle's samples file.
    let ps =
        problems(r, "{ lm_eval = { tasks = [\"a,b\", \"--x\", \"..\", \"a/b\"], limit = 0, metric = \"acc =1\" } }");
    has(&ps, &format!("{at}.tasks[0]: `a,b` is not a task name (letters, digits, `_`, `-`, `.`, no `..`)"));
    has(&ps, &format!("{at}.tasks[1]: `--x` is not a task name (letters, digits, `_`, `-`, `.`, no `..`)"));
    has(&ps, &format!("{at}.tasks[2]: `..` is not a task name (letters, digits, `_`, `-`, `.`, no `..`)"));
    has(&ps, &format!("{at}.tasks[3]: `a/b` is not a task name (letters, digits, `_`, `-`, `.`, no `..`)"));
    has(&ps, &format!("{at}.limit: 0 is out of range 1..=1000000"));
    has(&ps, &format!("{at}.metric: `acc =1` is not a results key such as `exact_match,none`"));
    let ps = problems(r, "{ lm_eval = { tasks = [] , limit = true } }");
    has(&ps, &format!("{at}.tasks: names no task"));
    has(&ps, &format!("{at}.limit: expected an integer, found a boolean"));

    // The built-in set's settings mean nothing with lm-eval's tasks.
    let ps = problems(r, "{ set = \"arith-v1\", count = 5, seed = 2, max_tokens = 9, lm_eval = { tasks = [\"a\"] } }");
    for key in ["set", "count", "seed", "max_tokens"] {
        has(
            &ps,
            &format!("profiles.p.qualify.quality.{key}: does not apply with `lm_eval` (its tasks bring their own)"),
        );
    }
    let ps = problems(r, "{ lm_evl = { tasks = [\"a\"] } }");
    has(&ps, "profiles.p.qualify.quality.lm_evl: unknown key; did you mean `lm_eval`?");
}
