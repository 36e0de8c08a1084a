//! Command lines to argv, and quoting into scripts (bash itself is the reference).

use std::process::Command;

use crate::flux::command::{command_argv, quote, quote_all};

/// What bash makes of `words`, quoted by [`quote_all`], as argv.
fn bash_argv(script_words: &str) -> Vec<String> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("printf '%s\\0' {script_words}"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut v: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .map(|s| String::from_utf8(s.to_vec()).unwrap())
        .collect();
    v.pop();
    v
}

#[test]
fn quote_survives_bash() {
    let words = [
        "plain",
        "",
        " ",
        "it's",
        "\"",
        "$HOME",
        "`id`",
        "$(id)",
        "*",
        "?",
        "[a]",
        "~",
        "#x",
        "a\nb",
        "tab\there",
        "back\\",
        "\\n",
        "-n",
        "--flag=a b",
        "héllo 🚀",
        "'",
        "''",
        "a'b'c",
        "{a,b}",
        "!",
        "%s",
        "a,b",
        "x=y",
    ];
    assert_eq!(bash_argv(&quote_all(&words)), words);
    assert_eq!(quote("abc-1.2/x:y=z@w%+"), "abc-1.2/x:y=z@w%+");
    assert_eq!(quote("a b"), "'a b'");
    assert_eq!(quote(""), "''");
}

#[test]
fn plain_command_lines_become_words() {
    let cases: &[(&str, &[&str])] = &[
        ("hostname", &["hostname"]),
        ("  lmp -in  in.reaxc  ", &["lmp", "-in", "in.reaxc"]),
        (r#"echo "a b" 'c d'"#, &["echo", "a b", "c d"]),
        (
            "bash -c 'echo $HOME; ls *'",
            &["bash", "-c", "echo $HOME; ls *"],
        ),
        ("python3 -c 'print(1)'", &["python3", "-c", "print(1)"]),
        ("echo 'two\nlines'", &["echo", "two\nlines"]),
        ("--opt=x", &["--opt=x"]),
    ];
    for (command, words) in cases {
        assert_eq!(command_argv(command).unwrap(), *words, "{command:?}");
    }
}

#[test]
fn shell_command_lines_go_to_bash_unchanged() {
    for command in [
        "echo $HOME",
        "echo \"$HOME\"",
        "echo `id`",
        "a | b",
        "a && b",
        "a; b",
        "a > out",
        "ls *.txt",
        "echo ~",
        "echo a # comment",
        "echo a\necho b",
        "echo a\\ b",
        "FOO=1 env",
        "cd /tmp",
        "export X=1",
        "if true; then echo; fi",
        "time mpirun ./app",
        "source env.sh",
        "echo 'unbalanced",
        "(subshell)",
        "{ grouped; }",
    ] {
        assert_eq!(
            command_argv(command).unwrap(),
            ["bash", "-c", command],
            "{command:?}"
        );
    }
    assert_eq!(command_argv(""), None);
    assert_eq!(command_argv(" \n\t"), None);
}

#[test]
fn split_words_match_bash() {
    // When a line is split, bash agrees word for word.
    for command in [
        "echo \"a b\" 'c d'",
        "x  y\tz",
        "a''b \"\" ''",
        "echo 'it'\"'\"'s'",
        "-n dash",
    ] {
        let words = command_argv(command).unwrap();
        assert_eq!(bash_argv(command), words, "{command:?}");
    }
}
