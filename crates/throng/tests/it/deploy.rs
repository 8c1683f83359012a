//! The deploy files under `deploy/` against the real tools: `systemd-analyze verify` accepts the
//! unit, the man pages render with `man -l` and `groff` without a warning and match what the
//! binary generates now (as do the shell completions), logrotate runs the snippet against a
//! running server, and `throng serve` speaks sd_notify as a `Type=notify` unit needs: `READY=1`
//! once its port serves, `STOPPING=1` at SIGTERM. The tools come from scripts/install-deps.sh
//! (systemd, man-db, groff-base, logrotate).

use std::io::{Read, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::logs::{request, start, Dir};
use crate::support::{eventually, signal_and_wait, spawn_serve_cmd};

/// `deploy/` in the source tree.
fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (installed by scripts/install-deps.sh)"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn systemd_unit_verifies() {
    let unit = std::fs::read_to_string(deploy_dir().join("throng.service")).unwrap();
    for line in [
        "Type=notify",
        "NotifyAccess=all",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "ExecStart=/usr/bin/throng serve --config /etc/throng/throng.toml",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "DynamicUser=yes",
        "LogsDirectory=throng",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} missing");
    }
    // verify needs the binary to exist: the same unit, started from the built binary.
    let dir = Dir::new("unit");
    let copy = dir.file("throng.service");
    std::fs::write(
        &copy,
        unit.replace(
            "ExecStart=/usr/bin/throng",
            &format!("ExecStart={}", env!("CARGO_BIN_EXE_throng")),
        ),
    )
    .unwrap();
    // --man=no: the man pages named in Documentation= are not installed on a build machine.
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The man pages committed under `deploy/man`, by file name.
fn committed_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(deploy_dir().join("man"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    pages
}

#[test]
fn man_pages_render_without_warnings() {
    let pages = committed_pages();
    assert!(pages.len() >= 4, "{pages:?}");
    for page in &pages {
        let out = run(Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l"])
            .arg(page)
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("LC_ALL", "C.UTF-8"));
        let shown = text(&out.stdout);
        assert!(
            out.status.success(),
            "man -l {}: {}",
            page.display(),
            text(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "man -l {} warns: {}",
            page.display(),
            text(&out.stderr)
        );
        assert!(
            shown.contains("NAME") && shown.contains("throng"),
            "{shown}"
        );
        let out = run(Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(page));
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "groff {}: {}",
            page.display(),
            text(&out.stderr)
        );
    }
    let serve = std::fs::read_to_string(deploy_dir().join("man/throng-serve.1")).unwrap();
    assert!(
        serve.contains("SIGUSR1"),
        "throng-serve(1) tells about the signals"
    );
}

#[test]
fn generated_files_are_up_to_date() {
    let dir = Dir::new("generate");
    let out_dir = dir.file("man");
    let out = run(Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["manpage", "--out"])
        .arg(&out_dir));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut fresh: Vec<PathBuf> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    fresh.sort();
    let names = |v: &[PathBuf]| -> Vec<String> {
        v.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let stale = "stale: run deploy/generate.sh and commit deploy/";
    assert_eq!(names(&fresh), names(&committed_pages()), "{stale}");
    for page in &fresh {
        let committed = deploy_dir().join("man").join(page.file_name().unwrap());
        assert!(
            std::fs::read(page).unwrap() == std::fs::read(&committed).unwrap(),
            "{} {stale}",
            committed.display()
        );
    }
    for (shell, file) in [
        ("bash", "throng.bash"),
        ("zsh", "_throng"),
        ("fish", "throng.fish"),
    ] {
        let out = run(Command::new(env!("CARGO_BIN_EXE_throng")).args(["completions", shell]));
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
        let committed = std::fs::read(deploy_dir().join("completions").join(file)).unwrap();
        assert!(out.stdout == committed, "completions/{file} {stale}");
    }
}

#[test]
fn sd_notify_ready_once_serving_and_stopping_at_sigterm() {
    let dir = Dir::new("notify");
    let socket_path = dir.file("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env("NOTIFY_SOCKET", &socket_path);
    let (mut child, addr, _) = spawn_serve_cmd(cmd);
    let mut buf = [0u8; 512];
    let mut recv = || {
        let n = socket.recv(&mut buf).expect("a notification within 10 s");
        text(&buf[..n])
    };
    assert_eq!(recv(), "READY=1\n");
    // Ready means serving: the port answers a request at once.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer:?}"
    );
    assert!(signal_and_wait(&mut child, libc::SIGTERM).success());
    assert_eq!(recv(), "STOPPING=1\n");
}

#[test]
fn logrotate_snippet_rotates_and_the_server_reopens() {
    let dir = Dir::new("logrotate");
    let (mut child, addr) = start(&dir);
    assert!(request(addr, "GET /status-json.xsl?before HTTP/1.0").contains("200"));
    assert!(eventually(|| dir.read("access.log").contains("?before")));
    // The snippet as shipped, with the log directory and the service's main pid of this test.
    let snippet = std::fs::read_to_string(deploy_dir().join("logrotate/throng")).unwrap();
    let systemctl = "systemctl kill --kill-whom=main --signal=USR1 throng.service";
    assert!(snippet.contains(systemctl) && snippet.contains("/var/log/throng/*.log"));
    let conf = dir.file("logrotate.conf");
    std::fs::write(
        &conf,
        snippet
            .replace("/var/log/throng/", &format!("{}/", dir.path.display()))
            .replace(systemctl, &format!("kill -USR1 {}", child.id())),
    )
    .unwrap();
    let out = run(Command::new("logrotate")
        .args(["--force", "--verbose", "--state"])
        .arg(dir.file("logrotate.state"))
        .arg(&conf));
    assert!(out.status.success(), "logrotate: {}", text(&out.stderr));
    assert!(
        eventually(|| dir.read("error.log").contains("logs reopened")),
        "no new error log after logrotate: {}",
        text(&out.stderr)
    );
    assert!(request(addr, "GET /status-json.xsl?after HTTP/1.0").contains("200"));
    assert!(eventually(|| dir.read("access.log").contains("?after")));
    assert!(signal_and_wait(&mut child, libc::SIGTERM).success());
    let rotated = dir.read("access.log.1");
    assert!(
        rotated.contains("?before") && !rotated.contains("?after"),
        "{rotated}"
    );
    assert!(dir.read("error.log.1").contains("SIGUSR1 received"));
}

/// Docker is not available here: check what can be checked without it. Every file the build
/// stage copies into the image exists, the image runs as a user other than root, and the
/// default command serves on every address at the exposed port.
#[test]
fn dockerfile_copies_existing_files_and_runs_unprivileged() {
    let docker = std::fs::read_to_string(deploy_dir().join("Dockerfile")).unwrap();
    let root = deploy_dir().join("..");
    let mut named = 0;
    for word in docker.split_whitespace() {
        let word = word.trim_end_matches(['\\', ';']);
        if word.starts_with("deploy/") || word == "throng.example.toml" {
            let pattern = root.join(word);
            let dir = pattern.parent().unwrap();
            let name = pattern.file_name().unwrap().to_string_lossy().into_owned();
            let found = match name.strip_prefix('*') {
                Some(suffix) => std::fs::read_dir(dir)
                    .unwrap()
                    .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(suffix)),
                None => pattern.is_file(),
            };
            assert!(found, "the Dockerfile copies {word}, which does not exist");
            named += 1;
        }
    }
    assert!(named >= 3, "{named} files named");
    let user = docker
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line");
    assert!(
        user.trim() != "root" && user.trim() != "0",
        "runs as {user}"
    );
    assert!(docker.lines().any(|l| l == "EXPOSE 8000"));
    assert!(docker
        .lines()
        .any(|l| l == r#"CMD ["serve", "--listen", "0.0.0.0:8000"]"#));
    // The default command parses as the binary's own command line.
    let out = run(Command::new(env!("CARGO_BIN_EXE_throng")).args([
        "serve",
        "--listen",
        "0.0.0.0:8000",
        "--help",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The Kubernetes versions whose JSON schemas scripts/install-deps.sh unpacks
/// (`K8S_SCHEMA_VERSIONS`): the oldest the manifests are meant for and the newest the schema
/// bundle has.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.33.0", "1.37.0"];
/// The resources in `deploy/kubernetes/*.yaml`: the token Secret, the scenario ConfigMap, the
/// agents' headless Service and Indexed Job, the controller's metrics Service and Job.
const KUBERNETES_RESOURCES: usize = 6;

/// One YAML document of a manifest file: its `kind`, its `metadata.name` and its lines.
struct Manifest {
    kind: String,
    name: String,
    lines: Vec<String>,
}

/// The documents of a manifest file, read as text: `---` separates them, `kind:` starts at the
/// first column and `metadata.name` is the first `name:` indented by two.
fn manifests(path: &Path) -> Vec<Manifest> {
    let yaml = std::fs::read_to_string(path).unwrap();
    let mut docs = Vec::new();
    for doc in yaml.split("\n---\n") {
        let lines: Vec<String> = doc.lines().map(str::to_owned).collect();
        let field = |prefix: &str| {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|v| v.trim().to_owned())
        };
        if let Some(kind) = field("kind: ") {
            let name = field("  name: ").unwrap_or_default();
            docs.push(Manifest { kind, name, lines });
        }
    }
    docs
}

impl Manifest {
    fn has(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l.trim() == line)
    }

    /// The trimmed lines of the block under the first line `key:` (at any indent).
    fn block(&self, key: &str) -> Vec<String> {
        let Some(start) = self.lines.iter().position(|l| l.trim() == key) else {
            return Vec::new();
        };
        let indent = |l: &str| l.len() - l.trim_start().len();
        let depth = indent(&self.lines[start]);
        self.lines[start + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || indent(l) > depth)
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect()
    }

    /// The value of the first `key: value` line (at any indent).
    fn value(&self, key: &str) -> Option<String> {
        self.lines.iter().find_map(|l| {
            l.trim()
                .strip_prefix(key)
                .and_then(|v| v.strip_prefix(": "))
                .map(|v| v.trim().trim_matches('"').to_owned())
        })
    }

    /// Whether the environment variable `var` is filled from key `key` of Secret `secret`.
    fn env_from_secret(&self, var: &str, secret: &str, key: &str) -> bool {
        let want = [
            format!("- name: {var}"),
            "valueFrom:".into(),
            "secretKeyRef:".into(),
            format!("name: {secret}"),
            format!("key: {key}"),
        ];
        self.lines.windows(want.len()).any(|w| {
            w.iter()
                .zip(&want)
                .all(|(l, want)| l.trim() == want.as_str())
        })
    }
}

/// `deploy/kubernetes/*.yaml` validate with kubeconform in strict mode (an unknown or misspelt
/// field fails) against the Kubernetes JSON schemas scripts/install-deps.sh unpacks (from the
/// PyPI package kubernetes-validate; kubeconform's default, GitHub, is not reachable here),
/// for every version in `KUBERNETES_VERSIONS`. The schemas know no enum values and nothing
/// across resources, so the text checks that the agents are an Indexed Job whose pods'
/// `subdomain` is a headless Service selecting them (the stable per-index DNS names the
/// controller connects to), that the agents run `throng bench agent` and the controller
/// names them by those DNS names, and that both take THRONG_BENCH_TOKEN from the Secret.
#[test]
fn kubernetes_manifests_validate() {
    let dir = deploy_dir().join("kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let all: Vec<Manifest> = files.iter().flat_map(|f| manifests(f)).collect();
    assert_eq!(
        all.len(),
        KUBERNETES_RESOURCES,
        "resources in {}: {:?}",
        dir.display(),
        all.iter().map(|m| (&m.kind, &m.name)).collect::<Vec<_>>()
    );

    let install = "installed by scripts/install-deps.sh: run it";
    let vendor =
        std::env::var("THRONG_VENDOR").unwrap_or_else(|_| "/usr/local/share/throng-vendor".into());
    let schemas = Path::new(&vendor).join("kubernetes-json-schema");
    let location = format!(
        "{}/{{{{ .NormalizedKubernetesVersion }}}}-local{{{{ .StrictSuffix }}}}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
        schemas.display()
    );
    for version in KUBERNETES_VERSIONS {
        let job_schema = schemas.join(format!("v{version}-local-strict/job-batch-v1.json"));
        assert!(
            job_schema.is_file(),
            "no Kubernetes {version} JSON schemas ({} missing), {install}",
            job_schema.display()
        );
        let mut cmd = Command::new("kubeconform");
        cmd.args(["-strict", "-summary", "-kubernetes-version", version])
            .args(["-schema-location", &location])
            .args(&files);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("kubeconform: {e} ({install})"));
        let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            out.status.success(),
            "kubeconform against Kubernetes {version}: {shown}\n{cmd:?}"
        );
        // Summary: 6 resources found in 4 files - Valid: 6, Invalid: 0, Errors: 0, Skipped: 0
        let summary = shown
            .lines()
            .find_map(|l| l.strip_prefix("Summary: "))
            .unwrap_or_else(|| panic!("no summary from kubeconform: {shown}"));
        let count = |label: &str| -> usize {
            let (before, after) = summary
                .split_once(" - ")
                .unwrap_or_else(|| panic!("summary {summary:?}"));
            let found = before.split_whitespace().next().unwrap();
            if label == "found" {
                return found.parse().unwrap();
            }
            after
                .split(", ")
                .find_map(|c| c.strip_prefix(&format!("{label}: ")))
                .unwrap_or_else(|| panic!("no {label} in summary {summary:?}"))
                .parse()
                .unwrap()
        };
        assert_eq!(count("found"), KUBERNETES_RESOURCES, "{summary}");
        assert_eq!(count("Valid"), KUBERNETES_RESOURCES, "{summary}");
        for bad in ["Invalid", "Errors", "Skipped"] {
            assert_eq!(count(bad), 0, "{summary}");
        }
    }

    let find = |kind: &str, name: &str| {
        all.iter()
            .find(|m| m.kind == kind && m.name == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in deploy/kubernetes/"))
    };
    let service = find("Service", "throng-bench-agents");
    let agents = find("Job", "throng-bench-agent");
    let controller = find("Job", "throng-bench-controller");
    find("Secret", "throng-bench-token");
    find("ConfigMap", "throng-bench-scenario");
    find("Service", "throng-bench-controller");

    assert!(
        service.has("clusterIP: None"),
        "the agents' Service is headless"
    );
    assert!(agents.has("completionMode: Indexed"));
    assert!(
        agents.has(&format!("subdomain: {}", service.name)),
        "the agent pods' subdomain is the headless Service's name"
    );
    let selector = service.block("selector:");
    assert!(!selector.is_empty(), "the agents' Service selects pods");
    let pod_labels = agents.block("template:");
    for label in &selector {
        assert!(
            pod_labels.contains(label),
            "the agent pods lack the Service's selector label {label}"
        );
    }
    let n = agents.value("parallelism").expect("parallelism");
    assert_eq!(agents.value("completions"), Some(n.clone()));
    let count_at = controller
        .lines
        .iter()
        .position(|l| l.trim() == "- name: THRONG_BENCH_AGENTS_COUNT")
        .expect("THRONG_BENCH_AGENTS_COUNT");
    assert_eq!(
        controller.lines[count_at + 1].trim(),
        format!("value: \"{n}\""),
        "the controller names as many agents as the Job runs"
    );
    assert!(
        agents
            .lines
            .iter()
            .any(|l| l.contains("/usr/bin/throng bench agent --listen 0.0.0.0:7700 --once")),
        "the agents run `throng bench agent --once` on port 7700"
    );
    // Each index's DNS name: <Job name>-<index>.<Service name>, port 7700.
    let dns = format!("{}-$i.{}:7700", agents.name, service.name);
    assert!(
        controller.lines.iter().any(|l| l.contains(&dns)),
        "the controller names the agents {dns}"
    );
    assert!(
        controller
            .lines
            .iter()
            .any(|l| l.contains("/usr/bin/throng bench run /etc/throng-bench/scenario.toml")),
        "the controller runs the scenario"
    );
    for job in [agents, controller] {
        assert!(
            job.env_from_secret("THRONG_BENCH_TOKEN", "throng-bench-token", "token"),
            "{} takes THRONG_BENCH_TOKEN from the Secret throng-bench-token",
            job.name
        );
        for line in [
            "backoffLimit: 0",
            "runAsNonRoot: true",
            "readOnlyRootFilesystem: true",
            "allowPrivilegeEscalation: false",
        ] {
            assert!(job.has(line), "{}: {line} missing", job.name);
        }
    }
}
