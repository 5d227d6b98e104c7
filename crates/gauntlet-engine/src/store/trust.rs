//! Who may write baselines. Pull-request code can read them but never write them: promotion needs an explicit
//! `--trusted` by a person, or CI showing a push or a manual dispatch on the default branch of the same repository.

use serde_json::Value;

use super::store::Provenance;

/// The decision, with the provenance to record when trusted, or the reason when not.
#[derive(Debug, Clone, PartialEq)]
pub enum Trust {
    Trusted(Provenance),
    Refused(String),
}

/// `env` looks up environment variables (a closure, so tests can give any CI context); `read` reads a file (the
/// GitHub event payload).
pub fn decide(explicit: bool, env: &dyn Fn(&str) -> Option<String>, read: &dyn Fn(&str) -> Option<String>) -> Trust {
    let github = env("GITHUB_ACTIONS").as_deref() == Some("true");
    if !github {
        if explicit {
            return Trust::Trusted(Provenance {
                event: "manual".into(),
                actor: env("USER").or_else(|| env("LOGNAME")),
                ..Provenance::default()
            });
        }
        return Trust::Refused(
            "promotion needs a trusted context: pass --trusted to promote by hand, or promote from CI on a push or \
             dispatch to the default branch"
                .into(),
        );
    }
    let event = env("GITHUB_EVENT_NAME").unwrap_or_default();
    let repository = env("GITHUB_REPOSITORY");
    let git_ref = env("GITHUB_REF");
    let provenance = Provenance {
        event: event.clone(),
        repository: repository.clone(),
        git_ref: git_ref.clone(),
        commit: env("GITHUB_SHA"),
        actor: env("GITHUB_ACTOR"),
        run_url: match (env("GITHUB_SERVER_URL"), &repository, env("GITHUB_RUN_ID")) {
            (Some(server), Some(repo), Some(id)) => Some(format!("{server}/{repo}/actions/runs/{id}")),
            _ => None,
        },
    };
    if event.starts_with("pull_request") {
        return Trust::Refused(format!(
            "this is a pull-request run ({event}): it may read baselines but never write them; baselines are \
             promoted by pushes or dispatches on the default branch"
        ));
    }
    if event != "push" && event != "workflow_dispatch" {
        return Trust::Refused(format!(
            "CI event `{event}` is not trusted to promote (only push and workflow_dispatch)"
        ));
    }
    // The default branch and the repository come from the event payload; without them, fail closed.
    let payload: Option<Value> =
        env("GITHUB_EVENT_PATH").and_then(|p| read(&p)).and_then(|t| serde_json::from_str(&t).ok());
    let Some(payload) = payload else {
        return Trust::Refused(
            "cannot read the GitHub event payload (GITHUB_EVENT_PATH) to find the default branch".into(),
        );
    };
    let Some(default_branch) = payload["repository"]["default_branch"].as_str() else {
        return Trust::Refused("the GitHub event payload names no repository.default_branch".into());
    };
    let want = format!("refs/heads/{default_branch}");
    if git_ref.as_deref() != Some(want.as_str()) {
        return Trust::Refused(format!(
            "only the default branch `{default_branch}` promotes; this run is on `{}`",
            git_ref.unwrap_or_default()
        ));
    }
    if payload["repository"]["full_name"].as_str() != repository.as_deref() {
        return Trust::Refused("the event's repository is not this repository".into());
    }
    Trust::Trusted(provenance)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn ctx(vars: &[(&str, &str)], payload: Option<&str>) -> Trust {
        let env: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let payload = payload.map(str::to_owned);
        decide(false, &|k| env.get(k).cloned(), &|_| payload.clone())
    }

    const MAIN: &str = r#"{"repository": {"default_branch": "main", "full_name": "acme/engine"}}"#;

    fn gh(event: &str, git_ref: &str) -> Vec<(&'static str, String)> {
        vec![
            ("GITHUB_ACTIONS", "true".into()),
            ("GITHUB_EVENT_NAME", event.into()),
            ("GITHUB_REF", git_ref.into()),
            ("GITHUB_REPOSITORY", "acme/engine".into()),
            ("GITHUB_SHA", "abc123".into()),
            ("GITHUB_ACTOR", "ci-bot".into()),
            ("GITHUB_EVENT_PATH", "/event.json".into()),
        ]
    }

    fn run(vars: Vec<(&'static str, String)>, payload: Option<&str>) -> Trust {
        let v: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ctx(&v, payload)
    }

    #[test]
    fn push_and_dispatch_on_main_are_trusted() {
        for event in ["push", "workflow_dispatch"] {
            match run(gh(event, "refs/heads/main"), Some(MAIN)) {
                Trust::Trusted(p) => {
                    assert_eq!(p.event, event);
                    assert_eq!(p.commit.as_deref(), Some("abc123"));
                    assert_eq!(p.repository.as_deref(), Some("acme/engine"));
                }
                other => panic!("{event}: {other:?}"),
            }
        }
    }

    #[test]
    fn pull_requests_and_forks_are_refused() {
        for event in ["pull_request", "pull_request_target"] {
            let Trust::Refused(why) = run(gh(event, "refs/pull/7/merge"), Some(MAIN)) else {
                panic!("{event} trusted")
            };
            assert!(why.contains("pull-request run"), "{why}");
        }
        let fork = r#"{"repository": {"default_branch": "main", "full_name": "mallory/engine"}}"#;
        let Trust::Refused(why) = run(gh("push", "refs/heads/main"), Some(fork)) else { panic!("fork trusted") };
        assert!(why.contains("not this repository"), "{why}");
    }

    #[test]
    fn other_branches_events_and_unknown_payloads_are_refused() {
        let Trust::Refused(why) = run(gh("push", "refs/heads/feature"), Some(MAIN)) else { panic!() };
        assert!(why.contains("only the default branch `main` promotes"), "{why}");
        let Trust::Refused(why) = run(gh("schedule", "refs/heads/main"), Some(MAIN)) else { panic!() };
        assert!(why.contains("`schedule` is not trusted"), "{why}");
        let Trust::Refused(why) = run(gh("push", "refs/heads/main"), None) else { panic!() };
        assert!(why.contains("cannot read the GitHub event payload"), "{why}");
    }

    #[test]
    fn outside_ci_only_an_explicit_flag_trusts() {
        let Trust::Refused(why) = ctx(&[], None) else { panic!() };
        assert!(why.contains("--trusted"), "{why}");
        let t = decide(true, &|k| (k == "USER").then(|| "ana".to_owned()), &|_| None);
        assert_eq!(
            t,
            Trust::Trusted(Provenance { event: "manual".into(), actor: Some("ana".into()), ..Provenance::default() })
        );
        // A pull request cannot make itself trusted with the flag.
        let env = gh("pull_request", "refs/pull/7/merge");
        let Trust::Refused(_) =
            decide(true, &|k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()), &|_| Some(MAIN.into()))
        else {
            panic!("PR trusted by flag")
        };
    }
}
