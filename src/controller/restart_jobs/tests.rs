use super::*;

fn report(source: JobsSource) -> JobsReport {
    JobsReport {
        source,
        pending: 1,
        running: 2,
        ended: 3,
    }
}

fn end(pod: &str, saved: bool, jobs: Option<JobsReport>) -> LeadEnd {
    LeadEnd {
        pod: pod.into(),
        jobs,
        saved,
    }
}

fn restore(pod: &str, error: &str) -> RestoreStatus {
    RestoreStatus {
        archive: "/a.tar".into(),
        pod: pod.into(),
        pending_jobs: 4,
        unfit_jobs: vec!["f1".into()],
        canceled_jobs: 5,
        ended_jobs: 6,
        error: error.into(),
    }
}

/// (from, kept, resumed, lost, failed, forgotten)
type Counts = (Option<CountedFrom>, i32, i32, i32, i32, i32);

fn counts(j: &RestartJobs) -> Counts {
    (
        j.counted_from,
        j.kept,
        j.resumed,
        j.lost,
        j.failed,
        j.forgotten,
    )
}

const NONE: Counts = (None, 0, 0, 0, 0, 0);

#[test]
fn each_restart_is_counted_from_the_record_that_holds_its_jobs() {
    let interactive = Keeps {
        archive: None,
        state_in_pod: true,
    };
    let archived = Keeps {
        archive: Some("/a.tar"),
        state_in_pod: false,
    };
    let bare = Keeps::default();
    let checkpoint = Some(report(JobsSource::Checkpoint));
    let stopped = Some(report(JobsSource::Instance));
    let old_saved = end("old", true, None);
    let old_unsaved = end("old", false, None);
    let old_counted = end("old", false, stopped);
    let other_counted = end("older", false, stopped);
    let read = restore("new", "");
    let unread = restore("new", "the archive is not whole");
    let new_pod = How::NewPod { old: "old" };
    // (case, how, keeps, evidence, counts, what `uncounted` says)
    let cases: Vec<(&str, How<'_>, Keeps<'_>, Evidence<'_>, Counts, &str)> = vec![
        (
            "a crash: the state the new instance starts from",
            How::SamePod,
            interactive,
            Evidence {
                crashed_run: checkpoint,
                ..Evidence::default()
            },
            (Some(CountedFrom::Checkpoint), 3, 1, 2, 0, 0),
            "not yet in the checkpoint",
        ),
        (
            "a crash whose state could not be counted",
            How::SamePod,
            interactive,
            Evidence::default(),
            NONE,
            "could not be counted",
        ),
        (
            "a job cluster's container restarted after its pod was stopped",
            How::SamePod,
            bare,
            Evidence {
                crashed_run: stopped,
                ..Evidence::default()
            },
            (Some(CountedFrom::StoppedInstance), 0, 0, 2, 0, 4),
            "",
        ),
        (
            "a restart in the same pod that restores the archive",
            How::SamePod,
            archived,
            Evidence::default(),
            NONE,
            "restored spec.archive.path in the same pod",
        ),
        (
            "a job cluster's container that crashed",
            How::SamePod,
            bare,
            Evidence::default(),
            NONE,
            "before it could count",
        ),
        (
            "a replaced pod that counted its jobs as it stopped",
            new_pod,
            bare,
            Evidence {
                old_lead: Some(&old_counted),
                ..Evidence::default()
            },
            (Some(CountedFrom::StoppedInstance), 0, 0, 2, 0, 4),
            "",
        ),
        (
            "a replaced pod that left no count (another pod's is not its)",
            new_pod,
            bare,
            Evidence {
                old_lead: Some(&other_counted),
                ..Evidence::default()
            },
            NONE,
            "before it could count",
        ),
        (
            "a replaced pod that saved, its archive read",
            new_pod,
            archived,
            Evidence {
                old_lead: Some(&old_saved),
                restore: Some(&read),
                ..Evidence::default()
            },
            (Some(CountedFrom::Archive), 6, 4, 5, 1, 0),
            "",
        ),
        (
            "a replaced pod that did not save, its archive not read yet",
            new_pod,
            archived,
            Evidence {
                old_lead: Some(&old_unsaved),
                ..Evidence::default()
            },
            NONE,
            "what old did after the archive was last saved",
        ),
        (
            "an archive that could not be read counts nothing",
            new_pod,
            archived,
            Evidence {
                old_lead: Some(&old_saved),
                restore: Some(&unread),
                ..Evidence::default()
            },
            NONE,
            "",
        ),
    ];
    for (case, how, keeps, evidence, want, uncounted) in cases {
        let got = at_restart(how, "new", keeps, evidence);
        assert_eq!(counts(&got), want, "{case}");
        assert_eq!(got.pod, "new", "{case}");
        if uncounted.is_empty() {
            assert_eq!(got.uncounted, "", "{case}");
        } else {
            assert!(
                got.uncounted.contains(uncounted),
                "{case}: {}",
                got.uncounted
            );
        }
    }
}

#[test]
fn an_archive_is_counted_once_the_new_lead_has_read_it_and_only_its_own() {
    let keeps = Keeps {
        archive: Some("/a.tar"),
        state_in_pod: false,
    };
    let waiting = at_restart(
        How::NewPod { old: "old" },
        "new",
        keeps,
        Evidence::default(),
    );
    assert_eq!(counts(&waiting), NONE);
    let someone_elses = restore("other", "");
    let evidence = |r| Evidence {
        restore: Some(r),
        ..Evidence::default()
    };
    let still = later(waiting.clone(), keeps, evidence(&someone_elses));
    assert_eq!(
        counts(&still),
        NONE,
        "another pod's restore is not this one's"
    );
    let read = restore("new", "");
    let counted = later(waiting, keeps, evidence(&read));
    assert_eq!(
        counts(&counted),
        (Some(CountedFrom::Archive), 6, 4, 5, 1, 0)
    );
    assert!(
        counted
            .uncounted
            .contains("after the archive was last saved")
    );
    let again = later(counted.clone(), keeps, evidence(&restore("new", "")));
    assert_eq!(again, counted, "a count is made once");
}

#[test]
fn the_summary_says_the_counts_where_they_came_from_and_what_they_miss() {
    let checkpoint = at_restart(
        How::SamePod,
        "new",
        Keeps {
            archive: None,
            state_in_pod: true,
        },
        Evidence {
            crashed_run: Some(report(JobsSource::Checkpoint)),
            ..Evidence::default()
        },
    );
    let words = summary(&checkpoint, false);
    assert!(
        words.contains("(counted from the state it left): 3 kept, 1 resumed, 2 lost, 0 failed")
            && words.contains("not yet in the checkpoint"),
        "{words}"
    );
    let waiting = RestartJobs {
        pod: "new".into(),
        ..RestartJobs::default()
    };
    let words = summary(&waiting, true);
    assert!(
        words.contains("counted once the new lead has read the archive"),
        "{words}"
    );
    let gone = RestartJobs {
        uncounted: gone_uncounted(),
        ..waiting
    };
    let words = summary(&gone, false);
    assert!(words.contains("they are gone, and not counted"), "{words}");
}
