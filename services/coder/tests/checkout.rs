//! `checkout` and `Checkout::patch` against real git repositories.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Fixture, git, source_repo};
use genesis_coder::{CoderError, checkout};
use genesis_core::Coded;
use serde_json::json;

#[tokio::test]
async fn a_local_repository_is_cloned_and_its_base_commit_recorded() {
    let fx = Fixture::new().await;
    let head = git(fx.source.path(), &["rev-parse", "HEAD"]);
    assert_eq!(fx.checkout.base_commit(), head.trim());
    assert_eq!(
        std::fs::read_to_string(fx.root().join("README.md")).unwrap(),
        "# demo\nhello world\n"
    );
    // A clean checkout has an empty patch.
    assert_eq!(fx.checkout.patch().await.unwrap(), "");
}

#[tokio::test]
async fn a_branch_is_checked_out_when_named() {
    let source = source_repo();
    git(source.path(), &["checkout", "-q", "-b", "feature"]);
    std::fs::write(source.path().join("feature.txt"), "on feature\n").unwrap();
    git(source.path(), &["add", "-A"]);
    git(source.path(), &["commit", "-q", "-m", "feature"]);
    let feature_head = git(source.path(), &["rev-parse", "HEAD"]);
    git(source.path(), &["checkout", "-q", "main"]);

    let scratch = tempfile::tempdir().unwrap();
    let into = scratch.path().join("work");
    let co = checkout(source.path().to_str().unwrap(), Some("feature"), &into)
        .await
        .unwrap();
    assert_eq!(co.base_commit(), feature_head.trim());
    assert!(into.join("feature.txt").is_file());
}

#[tokio::test]
async fn option_like_transport_and_empty_repositories_are_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let into = scratch.path().join("work");
    for bad in ["-oops", "--upload-pack=touch /tmp/x", "ext::sh -c x", ""] {
        let err = checkout(bad, None, &into).await.unwrap_err();
        match &err {
            CoderError::InvalidArgument { field, .. } => assert_eq!(*field, "repository"),
            other => panic!("{bad:?}: {other:?}"),
        }
        assert_eq!(err.code().as_str(), "INVALID_ARGUMENT");
        assert!(!into.exists(), "{bad:?} created the target");
    }
}

#[tokio::test]
async fn a_plain_directory_and_a_bad_branch_are_refused() {
    let plain = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let into = scratch.path().join("work");
    let err = checkout(plain.path().to_str().unwrap(), None, &into)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CoderError::InvalidArgument { field: "repository", reason } if reason.contains("not a git repository")),
        "{err:?}"
    );
    let source = source_repo();
    let err = checkout(source.path().to_str().unwrap(), Some("-b"), &into)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CoderError::InvalidArgument {
                field: "branch",
                ..
            }
        ),
        "{err:?}"
    );
    let err = checkout(source.path().to_str().unwrap(), Some("nope"), &into)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CoderError::Git { step: "clone", .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn patch_includes_new_files_and_leaves_the_index_alone() {
    let fx = Fixture::new().await;
    let diff =
        "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # demo\n-hello world\n+hello coder\n";
    fx.tools
        .call("apply_diff", &json!({ "diff": diff }))
        .await
        .unwrap();
    std::fs::write(fx.root().join("NEW.md"), "brand new\n").unwrap();
    let status_before = git(fx.root(), &["status", "--porcelain"]);

    let patch = fx.checkout.patch().await.unwrap();
    assert!(patch.contains("+hello coder"), "{patch}");
    assert!(patch.contains("-hello world"), "{patch}");
    assert!(patch.contains("+++ b/NEW.md"), "{patch}");
    assert!(patch.contains("+brand new"), "{patch}");

    // The real index is untouched: NEW.md is still untracked, README.md
    // still unstaged, and no temporary index is left behind.
    let status_after = git(fx.root(), &["status", "--porcelain"]);
    assert_eq!(status_before, status_after);
    assert!(status_after.contains(" M README.md"), "{status_after}");
    assert!(status_after.contains("?? NEW.md"), "{status_after}");
    let leftovers: Vec<_> = std::fs::read_dir(fx.root().join(".git"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("genesis-coder"))
        .collect();
    assert!(leftovers.is_empty());

    // The patch applies to a fresh clone of the base commit.
    let other = tempfile::tempdir().unwrap();
    let into = other.path().join("again");
    let co2 = checkout(fx.source.path().to_str().unwrap(), None, &into)
        .await
        .unwrap();
    std::fs::write(other.path().join("p.diff"), &patch).unwrap();
    git(
        co2.root(),
        &["apply", other.path().join("p.diff").to_str().unwrap()],
    );
    assert_eq!(
        std::fs::read_to_string(co2.root().join("NEW.md")).unwrap(),
        "brand new\n"
    );
}
