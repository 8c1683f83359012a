//! The Helm chart `deploy/helm/throng` (issue 41) against the real tools and the real server:
//! `helm lint` and `helm template` with its default values and with `ci/keda-values.yaml` (two
//! KEDA-scaled edges, WebRTC, a host port, a ServiceMonitor, the bench Jobs), `kubeconform
//! -strict` of both renderings against the Kubernetes schemas and the KEDA and Prometheus
//! Operator CRD schemas (all installed by scripts/install-deps.sh), and then what the schemas
//! cannot say: the rendered probes ask the endpoints the server answers (the rendered
//! `throng.toml` files are run by `throng serve` with the rendered Secret's passwords, and their
//! `/healthz/live` and `/healthz/ready` answer as documented), the ports are the port `--listen`
//! binds, the grace period outlasts the rendered `drain-timeout`, the autoscaler targets the
//! edges on `throng_listeners`, selectors select the pods, no password is in a ConfigMap, and
//! the dashboards ConfigMap holds deploy/grafana's files as they are.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{fresh_state_dir, get, Serve};

/// The Kubernetes versions of the schemas (as deploy.rs's check of deploy/kubernetes/).
const KUBERNETES_VERSIONS: [&str; 2] = ["1.33.0", "1.37.0"];

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/helm/throng")
}

fn vendor() -> PathBuf {
    PathBuf::from(
        std::env::var("THRONG_VENDOR").unwrap_or_else(|_| "/usr/local/share/throng-vendor".into()),
    )
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (installed by scripts/install-deps.sh)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `helm template throng <chart> --namespace radio [-f values]`: the rendered documents.
fn render(values: Option<&Path>) -> (String, Vec<Value>) {
    let mut cmd = Command::new("helm");
    cmd.args(["template", "throng"])
        .arg(chart())
        .args(["--namespace", "radio"]);
    if let Some(v) = values {
        cmd.arg("-f").arg(v);
    }
    let text = String::from_utf8(run(&mut cmd).stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("helm's YAML");
    (text, docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The document of `kind` named `name`.
fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| {
            let all: Vec<String> = docs
                .iter()
                .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
                .collect();
            panic!("no {kind} {name} in {all:?}")
        })
}

/// `kubeconform -strict` of `file` for every version: every resource valid, none skipped.
fn kubeconform(file: &Path, resources: usize) {
    let k8s = vendor().join("kubernetes-json-schema");
    let crds = vendor().join("crd-json-schema");
    let k8s_at = format!(
        "{}/{{{{ .NormalizedKubernetesVersion }}}}-local{{{{ .StrictSuffix }}}}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
        k8s.display()
    );
    let crd_at = format!(
        "{}/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
        crds.display()
    );
    for version in KUBERNETES_VERSIONS {
        let out = run(Command::new("kubeconform")
            .args(["-strict", "-summary", "-kubernetes-version", version])
            .args(["-schema-location", &k8s_at, "-schema-location", &crd_at])
            .arg(file));
        let summary = String::from_utf8_lossy(&out.stdout).into_owned();
        let want = format!(
            "{resources} resources found in 1 file - Valid: {resources}, Invalid: 0, Errors: 0, Skipped: 0"
        );
        assert!(
            summary.contains(&want),
            "kubeconform {version} of {}: {summary}",
            file.display()
        );
    }
}

/// The container named `throng` of a Deployment.
fn container(deployment: &Value) -> &Value {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "throng")
        .expect("container throng")
}

/// The port `--listen 0.0.0.0:PORT` of a container's args binds.
fn listen_port(c: &Value) -> u64 {
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = args.iter().position(|a| *a == "--listen").unwrap();
    args[at + 1].rsplit_once(':').unwrap().1.parse().unwrap()
}

/// A value of `key = N` in TOML text (the first, any table).
fn toml_number(toml: &str, key: &str) -> u64 {
    toml.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in {toml}"))
        .parse()
        .unwrap()
}

/// Checks one rendering (see the module comment); `keda`: the rendering of
/// `ci/keda-values.yaml` (autoscaled edges, WebRTC, the optional parts).
fn check_rendering(docs: &[Value], keda: bool) {
    let edge = find(docs, "Deployment", "throng-edge");
    let origin = find(docs, "Deployment", "throng-origin");
    let config = find(docs, "ConfigMap", "throng-config");
    let secret = find(docs, "Secret", "throng-auth");
    let edge_toml = config["data"]["edge.toml"].as_str().unwrap();
    let origin_toml = config["data"]["origin.toml"].as_str().unwrap();
    // Passwords only in the Secret.
    for key in ["source-password", "admin-password", "cluster-secret"] {
        let v = secret["stringData"][key].as_str().unwrap();
        assert!(v.len() >= 8, "{key}: {v:?}");
        assert!(
            !edge_toml.contains(v) && !origin_toml.contains(v),
            "{key} in the ConfigMap"
        );
    }
    for (d, toml) in [(edge, edge_toml), (origin, origin_toml)] {
        let c = container(d);
        let port = listen_port(c);
        let ports = c["ports"].as_array().unwrap();
        let http = ports.iter().find(|p| p["name"] == "http").unwrap();
        assert_eq!(
            http["containerPort"], port,
            "the http port is the one --listen binds"
        );
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz/live");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz/ready");
        for probe in ["livenessProbe", "readinessProbe"] {
            assert_eq!(c[probe]["httpGet"]["port"], "http");
        }
        // SIGKILL only after the drain.
        let grace = d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap();
        let drain = toml_number(toml, "drain-timeout");
        assert!(
            grace > drain,
            "terminationGracePeriodSeconds {grace} <= drain-timeout {drain}"
        );
        // Every password from the Secret, none in the file.
        for (var, key) in [
            ("THRONG_SOURCE_PASSWORD", "source-password"),
            ("THRONG_ADMIN_PASSWORD", "admin-password"),
            ("THRONG_CLUSTER_SECRET", "cluster-secret"),
        ] {
            let env = c["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == var)
                .unwrap_or_else(|| panic!("no {var}"));
            assert_eq!(env["valueFrom"]["secretKeyRef"]["name"], "throng-auth");
            assert_eq!(env["valueFrom"]["secretKeyRef"]["key"], key);
        }
        // The Service and PDB select these pods.
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let component = labels["app.kubernetes.io/component"].as_str().unwrap();
        let service = find(docs, "Service", &format!("throng-{component}"));
        for (k, v) in service["spec"]["selector"].as_object().unwrap() {
            assert_eq!(&labels[k], v, "Service throng-{component} selects {k}={v}");
        }
        assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    }
    let edge_c = container(edge);
    let public = edge_c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "THRONG_PUBLIC_URL")
        .unwrap();
    // $(VAR) expansion needs the variable defined before.
    let names: Vec<&str> = edge_c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let used = public["value"].as_str().unwrap();
    for var in ["POD_IP", "HOST_IP"] {
        if used.contains(&format!("$({var})")) {
            let at = names.iter().position(|n| *n == var).unwrap();
            assert!(
                at < names
                    .iter()
                    .position(|n| *n == "THRONG_PUBLIC_URL")
                    .unwrap()
            );
        }
    }
    let pdb = find(docs, "PodDisruptionBudget", "throng-edge");
    let edge_labels = &edge["spec"]["template"]["metadata"]["labels"];
    for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&edge_labels[k], v);
    }
    // The dashboards are deploy/grafana's files.
    let dashboards = find(docs, "ConfigMap", "throng-dashboards");
    let grafana = chart().join("../../grafana");
    for name in ["throng-dashboard.json", "throng-bench-dashboard.json"] {
        let file = std::fs::read_to_string(grafana.join(name)).unwrap();
        assert_eq!(
            dashboards["data"][name].as_str().map(str::trim_end),
            Some(file.trim_end()),
            "{name} in the dashboards ConfigMap"
        );
    }
    if keda {
        let so = find(docs, "ScaledObject", "throng-edge");
        assert_eq!(so["spec"]["scaleTargetRef"]["name"], "throng-edge");
        let trigger = &so["spec"]["triggers"][0];
        assert_eq!(trigger["type"], "prometheus");
        let query = trigger["metadata"]["query"].as_str().unwrap();
        assert!(query.starts_with("sum(throng_listeners{"), "{query}");
        // 70 % of the capacity per edge.
        let capacity = toml_number(edge_toml, "capacity");
        assert_eq!(
            trigger["metadata"]["threshold"],
            (capacity * 70 / 100).to_string()
        );
        assert!(
            edge["spec"].get("replicas").is_none(),
            "KEDA sets the count"
        );
        // WebRTC: one UDP port per shard from the HTTP port up, in the pod and the Service.
        let workers = toml_number(edge_toml, "workers");
        let udp = edge_c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["protocol"] == "UDP")
            .count() as u64;
        assert_eq!(udp, workers);
        find(docs, "ServiceMonitor", "throng");
        find(docs, "Job", "throng-bench-agent");
        find(docs, "Job", "throng-bench-controller");
    } else {
        assert_eq!(edge["spec"]["replicas"], 2);
    }
}

/// Runs a rendered `throng.toml` with the rendered Secret's passwords; returns the server.
fn serve_rendered(
    dir: &Path,
    name: &str,
    toml: &str,
    secret: &Value,
    envs: &[(&str, &str)],
) -> Serve {
    let file = dir.join(name);
    std::fs::write(&file, toml).unwrap();
    let state = fresh_state_dir();
    let pass = |k: &str| secret["stringData"][k].as_str().unwrap().to_owned();
    let (source, admin, cluster) = (
        pass("source-password"),
        pass("admin-password"),
        pass("cluster-secret"),
    );
    let mut all: Vec<(&str, &OsStr)> = vec![
        ("THRONG_STATE_DIR", state.as_os_str()),
        ("THRONG_SOURCE_PASSWORD", OsStr::new(&source)),
        ("THRONG_ADMIN_PASSWORD", OsStr::new(&admin)),
        ("THRONG_CLUSTER_SECRET", OsStr::new(&cluster)),
    ];
    for (k, v) in envs {
        all.push((k, OsStr::new(v)));
    }
    Serve::spawn(
        [
            OsStr::new("--listen"),
            OsStr::new("127.0.0.1:0"),
            OsStr::new("--config"),
            file.as_os_str(),
        ],
        &all,
    )
}

/// The status and JSON body of `GET path`.
fn get_json(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    let (status, text) = get(addr, path, "");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn helm_chart_lints_renders_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let keda = chart().join("ci/keda-values.yaml");
    for values in [None, Some(keda.as_path())] {
        let mut cmd = Command::new("helm");
        cmd.args(["lint", "--strict"]).arg(chart());
        if let Some(v) = values {
            cmd.arg("-f").arg(v);
        }
        let out = run(&mut cmd);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(said.contains("0 chart(s) failed"), "{said}");
    }
    let (default_text, defaults) = render(None);
    let (keda_text, keda_docs) = render(Some(&keda));
    for (name, text, docs) in [
        ("default.yaml", &default_text, &defaults),
        ("keda.yaml", &keda_text, &keda_docs),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        kubeconform(&file, docs.len());
    }
    check_rendering(&defaults, false);
    check_rendering(&keda_docs, true);

    // The rendered files run: the origin is ready and live; an edge whose origin is not there
    // (its relay has no feed) is live but not ready, saying why.
    let config = find(&defaults, "ConfigMap", "throng-config");
    let secret = find(&defaults, "Secret", "throng-auth");
    let origin = serve_rendered(
        dir.path(),
        "origin.toml",
        config["data"]["origin.toml"].as_str().unwrap(),
        secret,
        &[],
    );
    let (status, live) = get_json(origin.addr, "/healthz/live");
    assert_eq!((status, live["live"].clone()), (200, Value::Bool(true)));
    let (status, ready) = get_json(origin.addr, "/healthz/ready");
    assert_eq!(status, 200, "{ready}");
    let edge = serve_rendered(
        dir.path(),
        "edge.toml",
        config["data"]["edge.toml"].as_str().unwrap(),
        secret,
        &[("THRONG_PUBLIC_URL", "http://127.0.0.1:1")],
    );
    let (status, _) = get_json(edge.addr, "/healthz/live");
    assert_eq!(status, 200);
    let (status, ready) = get_json(edge.addr, "/healthz/ready");
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["reasons"][0]["key"], "relay-not-live", "{ready}");
}
