//! A real Kubernetes control plane for the `apiserver` suite: etcd and
//! kube-apiserver as `scripts/control-plane.sh up` starts them (one per
//! test, in a temporary directory, stopped when dropped), `kubectl` as users
//! run it, and the webhook installed the way `docs/local-cluster.md` tells
//! users to: `manifests --webhook-url`, a TokenRequest token of its
//! ServiceAccount, `serve --kubeconfig` with the Secret route.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::gpu_pod;
use super::process::{self, Run};
use super::server::{Options, Server, free_port};

/// Set to `1` (as `.ci/run` does after building the control plane) to make
/// a missing control plane a failure instead of a skip.
pub const REQUIRE: &str = "GPU_POLICY_REQUIRE_CONTROL_PLANE";
/// The webhook's namespace and the name of everything it installs.
pub const NAME: &str = "gpu-policy";
/// The mode label that opts a namespace in.
pub const MODE_LABEL: &str = "gpu-policy.io/mode";
/// How long anything the API server does in the background (a webhook
/// configuration taking effect, the caBundle being filled) may take.
pub const SETTLE: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> PathBuf {
    root().join("scripts/control-plane.sh")
}

/// Where `scripts/control-plane.sh build` puts the binaries of the
/// Kubernetes version that `KUBERNETES_VERSION` selects (the script's
/// default when unset): what `control-plane.sh bin-dir` prints, asked once.
pub fn bin_dir() -> PathBuf {
    static BIN_DIR: OnceLock<PathBuf> = OnceLock::new();
    BIN_DIR
        .get_or_init(|| {
            let out = Command::new("bash")
                .arg(script())
                .arg("bin-dir")
                .output()
                .expect("bash runs scripts/control-plane.sh");
            assert!(
                out.status.success(),
                "scripts/control-plane.sh bin-dir failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            let dir = String::from_utf8(out.stdout).expect("bin-dir prints a UTF-8 path");
            PathBuf::from(dir.strip_suffix('\n').unwrap_or(&dir))
        })
        .clone()
}

fn built() -> bool {
    ["kube-apiserver", "kubectl", "etcd", "policy-status-controller"]
        .iter()
        .all(|name| bin_dir().join(name).is_file())
}

/// A running etcd and kube-apiserver, stopped (`control-plane.sh down`) when
/// dropped; their state lives in a temporary directory.
pub struct ControlPlane {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub api_url: String,
    pub ca_file: PathBuf,
    /// What `kubectl api-versions` lists, read once.
    served: OnceLock<Vec<String>>,
    /// The minor version `/version` says, read once.
    minor: OnceLock<u32>,
    _scratch: TempDir,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // The state is thrown away: no need to wait for a clean shutdown.
        let _ = Command::new("bash")
            .arg(script())
            .arg("down")
            .arg(&self.dir)
            .env("CONTROL_PLANE_STOP_TIMEOUT", "2")
            .output();
    }
}

impl ControlPlane {
    /// Starts one, or returns `None` after printing (once) how to build it
    /// when its binaries are missing, unless [`REQUIRE`] is `1`.
    pub fn start() -> Option<Self> {
        if !built() {
            let required = std::env::var(REQUIRE).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{REQUIRE}=1 but {} has no control plane: run scripts/control-plane.sh build",
                bin_dir().display()
            );
            static SKIPPED: Once = Once::new();
            SKIPPED.call_once(|| {
                println!(
                    "skipped: no control plane in {}; build it with `scripts/control-plane.sh build`",
                    bin_dir().display()
                );
            });
            return None;
        }
        let scratch = tempfile::tempdir().expect("tempdir");
        let dir = scratch.path().join("cluster");
        let mut command = Command::new("bash");
        command.arg(script()).arg("up").arg(&dir);
        let up = process::run_command(command, None);
        assert_eq!(up.code, 0, "control-plane.sh up failed:\n{}", up.stderr);
        let port = std::fs::read_to_string(dir.join("apiserver.port")).expect("apiserver.port");
        Some(Self {
            kubeconfig: dir.join("admin.kubeconfig"),
            api_url: format!("https://127.0.0.1:{}", port.trim()),
            ca_file: dir.join("pki/ca.crt"),
            dir,
            served: OnceLock::new(),
            minor: OnceLock::new(),
            _scratch: scratch,
        })
    }

    /// `kubectl ARGS` as the cluster admin.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        self.kubectl_stdin(args, None)
    }

    /// `kubectl ARGS` as the cluster admin, with `stdin`.
    /// The DRA objects of `stdin`, written as `resource.k8s.io/v1` as the
    /// tests write them, go as the cluster serves them ([`Self::served_dra`]).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let served;
        let stdin = match stdin {
            Some(text)
                if text.contains("resource.k8s.io/v1") && !self.serves("resource.k8s.io/v1") =>
            {
                served = self.served_dra_yaml(text);
                Some(served.as_str())
            }
            other => other,
        };
        let mut run = self.kubectl_raw(args, stdin);
        // What the API server answers of its v1beta1 objects, as the tests
        // read them.
        if run.stdout.contains("resource.k8s.io/v1beta1")
            && !self.serves("resource.k8s.io/v1")
            && let Ok(mut value) = serde_json::from_str::<Value>(&run.stdout)
        {
            match value["items"].as_array_mut() {
                Some(items) => items.iter_mut().for_each(as_v1_dra),
                None => as_v1_dra(&mut value),
            }
            run.stdout = value.to_string();
        }
        run
    }

    /// `kubectl ARGS` as the cluster admin, input and output as they are.
    fn kubectl_raw(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut command = Command::new(bin_dir().join("kubectl"));
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--request-timeout=30s")
            .args(args)
            .env_remove("KUBECONFIG");
        process::run_command(command, stdin)
    }

    /// `kubectl apply --server-side -f -` of a YAML stream; must succeed.
    #[track_caller]
    pub fn apply(&self, yaml: &str) -> Run {
        self.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(yaml)).success()
    }

    /// `kubectl apply --dry-run=server -o json -f -`: the object as it would
    /// be stored, or the refusal on stderr.
    pub fn dry_run(&self, yaml: &str) -> Run {
        self.kubectl_stdin(&["apply", "--dry-run=server", "-o", "json", "-f", "-"], Some(yaml))
    }

    /// `kubectl create -f -` (a real write, unlike [`Self::dry_run`]).
    pub fn create(&self, yaml: &str) -> Run {
        self.kubectl_stdin(&["create", "-o", "json", "-f", "-"], Some(yaml))
    }

    /// `kubectl get -o json` of one object.
    #[track_caller]
    /// `kubectl get -o json ARGS`: DRA objects of `resource.k8s.io/v1beta1`
    /// (Kubernetes 1.32 and 1.33) come back in the shape of `v1`
    /// ([`as_v1_dra`], as for every kubectl answer), as the tests read them.
    pub fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get", "-o", "json"];
        all.extend_from_slice(args);
        self.kubectl(&all).success().value()
    }

    /// A namespace with the mode label (none: not opted in) and the
    /// `default` ServiceAccount that the controller manager would create
    /// (without it the ServiceAccount admission plugin refuses every pod).
    #[track_caller]
    pub fn namespace(&self, name: &str, mode: Option<&str>) {
        let labels =
            mode.map(|mode| format!("\n  labels:\n    {MODE_LABEL}: {mode}")).unwrap_or_default();
        self.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}{labels}\n---\n\
             apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: {name}\n"
        ));
    }

    /// A kubeconfig in `dir` that authenticates as ServiceAccount
    /// `namespace/name` with a TokenRequest token (`kubectl create token`).
    pub fn service_account_kubeconfig(&self, dir: &Path, namespace: &str, name: &str) -> PathBuf {
        let token = self
            .kubectl(&["create", "token", name, "-n", namespace, "--duration=2h"])
            .success()
            .stdout;
        let path = dir.join(format!("{namespace}-{name}.kubeconfig"));
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: control-plane\n  cluster:\n    \
             server: {}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    \
             token: {}\ncontexts:\n- name: {name}\n  context:\n    cluster: control-plane\n    \
             user: {name}\ncurrent-context: {name}\n",
            self.api_url,
            self.ca_file.display(),
            token.trim()
        );
        std::fs::write(&path, config).expect("write kubeconfig");
        path
    }

    /// The API server's audit log, one event per line.
    pub fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Starts the ValidatingAdmissionPolicy status controller (built with
    /// the control plane from tests/control-plane/policy-status-controller/)
    /// against this control plane, its log in `dir`.
    pub fn start_policy_status_controller(&self) -> PolicyStatusController {
        let binary = bin_dir().join("policy-status-controller");
        let log = std::fs::File::create(self.dir.join("policy-status-controller.log"))
            .expect("policy-status-controller.log");
        let child = Command::new(binary)
            .arg(&self.kubeconfig)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("the policy status controller starts");
        PolicyStatusController { child }
    }

    /// Whether the API server serves `group_version` as `kubectl
    /// api-versions` lists it (`resource.k8s.io/v1beta1`; `v1` for the core
    /// group), read once.
    pub fn serves(&self, group_version: &str) -> bool {
        let served = self.served.get_or_init(|| {
            self.kubectl_raw(&["api-versions"], None)
                .success()
                .stdout
                .lines()
                .map(str::to_owned)
                .collect()
        });
        served.iter().any(|served| served == group_version)
    }

    /// The API server's Kubernetes minor version (32 for 1.32), from
    /// `/version`, read once.
    pub fn minor(&self) -> u32 {
        *self.minor.get_or_init(|| {
            let version = self.kubectl_raw(&["get", "--raw", "/version"], None).success().value();
            // Distributions may append to it ("32+").
            let minor = version["minor"].as_str().unwrap_or_default();
            let digits = minor.trim_end_matches(|c: char| !c.is_ascii_digit());
            digits.parse().unwrap_or_else(|_| panic!("/version has no numeric minor: {version}"))
        })
    }

    /// A Dynamic Resource Allocation object written as
    /// `resource.k8s.io/v1`, as this cluster serves it: unchanged where
    /// `v1` is served; else as `v1beta1` (Kubernetes 1.32 and 1.33), each
    /// request flat (the fields of its `exactly` on the request itself) and
    /// each ResourceSlice device's attributes and capacity under `basic`.
    pub fn served_dra(&self, mut object: Value) -> Value {
        if self.serves("resource.k8s.io/v1") {
            return object;
        }
        object["apiVersion"] = Value::from("resource.k8s.io/v1beta1");
        for at in ["/spec/devices/requests", "/spec/spec/devices/requests"] {
            let Some(Value::Array(requests)) = object.pointer_mut(at) else {
                continue;
            };
            for request in requests.iter_mut() {
                let Some(Value::Object(exactly)) =
                    request.as_object_mut().and_then(|r| r.remove("exactly"))
                else {
                    continue;
                };
                if let Some(request) = request.as_object_mut() {
                    request.extend(exactly);
                }
            }
        }
        if object["kind"] == "ResourceSlice"
            && let Some(Value::Array(devices)) = object.pointer_mut("/spec/devices")
        {
            for device in devices.iter_mut() {
                let Some(fields) = device.as_object_mut() else {
                    continue;
                };
                let mut basic = serde_json::Map::new();
                for key in ["attributes", "capacity"] {
                    if let Some(value) = fields.remove(key) {
                        basic.insert(key.to_owned(), value);
                    }
                }
                fields.insert("basic".to_owned(), Value::Object(basic));
            }
        }
        object
    }

    /// [`Self::served_dra`] of each document of a YAML stream of
    /// `resource.k8s.io/v1` objects, as a YAML stream.
    pub fn served_dra_yaml(&self, yaml: &str) -> String {
        let objects: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("YAML");
        let objects: Vec<Value> = objects
            .into_iter()
            .map(|object| match object["apiVersion"].as_str() {
                Some("resource.k8s.io/v1") => self.served_dra(object),
                _ => object,
            })
            .collect();
        // Block YAML: kubectl reads a stream that starts with `{` as JSON.
        serde_saphyr::to_string_multiple(&objects).expect("YAML")
    }

    /// The cluster's release as `manifests --kube-version` takes it
    /// (`1.32`).
    pub fn kube_version(&self) -> String {
        format!("1.{}", self.minor())
    }

    /// `manifests ARGS --kube-version <the cluster's release>`: what an
    /// operator renders for this cluster; must succeed.
    pub fn manifests(&self, args: &[&str]) -> String {
        let version = self.kube_version();
        let mut all = vec!["manifests"];
        all.extend(args);
        all.extend(["--kube-version", &version]);
        process::gpu_policy(&all, None).success().stdout
    }

    /// Polls `condition` until it holds, for up to [`SETTLE`].
    #[track_caller]
    pub fn eventually(&self, what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + SETTLE;
        while !condition() {
            assert!(Instant::now() < deadline, "not within {SETTLE:?}: {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The message of the admission webhook that refused a kubectl write (what
/// follows `denied the request: ` on its line); None when none did.
/// A `resource.k8s.io/v1beta1` DRA object in the shape of `v1`: each
/// request's class, count, mode, selectors and admin access under
/// `exactly`, a slice's device attributes and capacity out of `basic`.
/// Other objects are left alone.
pub fn as_v1_dra(object: &mut Value) {
    if object["apiVersion"] != "resource.k8s.io/v1beta1" {
        return;
    }
    object["apiVersion"] = Value::from("resource.k8s.io/v1");
    const EXACT: [&str; 6] =
        ["deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations"];
    for at in ["/spec/devices/requests", "/spec/spec/devices/requests"] {
        let Some(Value::Array(requests)) = object.pointer_mut(at) else {
            continue;
        };
        for request in requests.iter_mut().filter_map(Value::as_object_mut) {
            if request.contains_key("firstAvailable") {
                continue;
            }
            let exactly: serde_json::Map<String, Value> = EXACT
                .iter()
                .filter_map(|key| request.remove(*key).map(|v| ((*key).to_owned(), v)))
                .collect();
            request.insert("exactly".to_owned(), Value::Object(exactly));
        }
    }
    if object["kind"] == "ResourceSlice"
        && let Some(Value::Array(devices)) = object.pointer_mut("/spec/devices")
    {
        for device in devices.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(Value::Object(basic)) = device.remove("basic") {
                device.extend(basic);
            }
        }
    }
}

pub fn denial(run: &Run) -> Option<&str> {
    let refused = run.stderr.lines().find_map(|line| {
        let (_, message) = line.split_once(" denied the request: ")?;
        Some(message.trim_end())
    });
    refused.filter(|_| run.code != 0)
}

/// The pod of an object: itself, or a workload's pod template.
pub fn pod_of(object: &Value) -> Option<&Value> {
    match object["kind"].as_str()? {
        "Pod" => Some(object),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template"),
        "PodTemplate" => object.get("template"),
        _ => object.pointer("/spec/template"),
    }
}

/// The fields of an object's pod that gpu-policy writes, to compare what the
/// API server stored with what `check` printed: every container's `env`
/// (keyed `list/name`), `runtimeClassName`, `affinity` and the
/// `gpu-policy.io/` annotations; null for an object without a pod. What
/// the API server adds itself (defaults, a RuntimeClass's overhead) is left
/// out.
pub fn policy_fields(object: &Value) -> Value {
    let Some(pod) = pod_of(object) else {
        return Value::Null;
    };
    let spec = &pod["spec"];
    let mut env = serde_json::Map::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec[list].as_array().into_iter().flatten() {
            let name = container["name"].as_str().unwrap_or_default();
            env.insert(format!("{list}/{name}"), container["env"].clone());
        }
    }
    let annotations: serde_json::Map<String, Value> = pod["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with("gpu-policy.io/"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    serde_json::json!({
        "env": env,
        "runtimeClassName": spec["runtimeClassName"],
        "affinity": spec["affinity"],
        "annotations": annotations,
    })
}

/// The RuntimeClass of the NVIDIA container runtime.
pub const NVIDIA_RUNTIME_CLASS: &str =
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\nhandler: nvidia\n";

/// How [`Webhook::install`] runs the server.
#[derive(Debug, Default)]
pub struct WebhookOptions {
    /// `manifests --config` and `serve --config`.
    pub config: Option<PathBuf>,
    /// `serve --client-ca` with the cluster's CA and `--client-name` of the
    /// API server's webhook client certificate.
    pub client_auth: bool,
}

/// gpu-policy installed into a [`ControlPlane`]: the rendered namespace,
/// RBAC and webhook configurations (`manifests --webhook-url`) applied, the
/// real binary serving with its ServiceAccount's token.
pub struct Webhook {
    pub server: Server,
    pub url: String,
    /// What `manifests` rendered and was applied.
    pub manifests: String,
    options: WebhookOptions,
    kubeconfig: PathBuf,
    _scratch: TempDir,
}

impl Webhook {
    /// The `manifests` flags of this install, for the cluster's release.
    fn manifest_args(cluster: &ControlPlane, url: &str, options: &WebhookOptions) -> Vec<String> {
        let mut args = vec![
            "manifests".to_owned(),
            "--webhook-url".to_owned(),
            url.to_owned(),
            "--kube-version".to_owned(),
            cluster.kube_version(),
        ];
        if let Some(config) = &options.config {
            args.push("--config".to_owned());
            args.push(config.display().to_string());
        }
        args
    }

    /// Renders, applies and starts; returns once the server is ready (its
    /// watches listed) and the API server trusts it (caBundle filled).
    pub async fn install(cluster: &ControlPlane, options: WebhookOptions) -> Self {
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let manifests = process::gpu_policy(&Self::manifest_args(cluster, &url, &options), None)
            .success()
            .stdout;
        cluster.apply(&manifests);
        // What the GPU Operator creates: without it the webhook does not
        // inject the runtime class (a pod naming a missing class would
        // never start) and warns instead.
        cluster.apply(NVIDIA_RUNTIME_CLASS);
        let scratch = tempfile::tempdir().expect("tempdir");
        let kubeconfig = cluster.service_account_kubeconfig(scratch.path(), NAME, NAME);
        let server = Self::serve(cluster, &kubeconfig, port, &options).await;
        let webhook = Self { server, url, manifests, options, kubeconfig, _scratch: scratch };
        webhook.wait_for_ca_bundles(cluster);
        webhook
    }

    async fn serve(
        cluster: &ControlPlane,
        kubeconfig: &Path,
        port: u16,
        options: &WebhookOptions,
    ) -> Server {
        let mut extra_args: Vec<String> = [
            "--cert-secret",
            "gpu-policy/gpu-policy-tls",
            "--webhook-config",
            NAME,
            "--dns-name",
            "127.0.0.1",
        ]
        .map(str::to_owned)
        .to_vec();
        if options.client_auth {
            extra_args.push("--client-ca".to_owned());
            extra_args.push(cluster.ca_file.display().to_string());
            extra_args.push("--client-name".to_owned());
            extra_args.push("kube-apiserver-webhook-client".to_owned());
        }
        Server::start(
            Options {
                kubeconfig: Some(kubeconfig.to_path_buf()),
                config: options.config.clone(),
                admission_port: Some(port),
                extra_args,
                ready_timeout: Some(Duration::from_secs(60)),
                ..Options::default()
            },
            Some(Vec::new()),
        )
        .await
    }

    /// Stops the server and waits until it has exited, so that nothing
    /// answers on its port any more (the webhook configurations stay).
    pub async fn stop(&mut self) {
        self.server.terminate();
        self.server.wait_exit(Duration::from_secs(30)).await;
    }

    /// Starts it again on the same port, with the same token.
    pub async fn restart(&mut self, cluster: &ControlPlane) {
        let port = self.server.admission.port();
        self.server = Self::serve(cluster, &self.kubeconfig, port, &self.options).await;
    }

    /// The CA the server's Secret holds, once it is in both webhook
    /// configurations' every caBundle.
    fn wait_for_ca_bundles(&self, cluster: &ControlPlane) {
        cluster.eventually("the server fills caBundle of every webhook", || {
            let Some(ca) = cluster
                .kubectl(&["get", "secret", "-n", NAME, "gpu-policy-tls", "-o", "json"])
                .stdout
                .parse::<Value>()
                .ok()
                .and_then(|s| s["data"]["ca.crt"].as_str().map(str::to_owned))
            else {
                return false;
            };
            ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"].iter().all(|kind| {
                let config = cluster.kubectl(&["get", kind, NAME, "-o", "json"]);
                let Ok(config) = config.stdout.parse::<Value>() else {
                    return false;
                };
                config["webhooks"].as_array().is_some_and(|hooks| {
                    hooks.iter().all(|hook| hook["clientConfig"]["caBundle"].as_str() == Some(&ca))
                })
            })
        });
    }

    /// Waits until the API server calls the webhook for pods of the
    /// `enforce` namespace `namespace` (a configuration takes effect a moment
    /// after it is written): a dry-run GPU pod comes back mutated.
    pub fn wait_effective(&self, cluster: &ControlPlane, namespace: &str) {
        let pod = gpu_pod().name("probe").namespace(namespace).manifest();
        cluster.eventually("the webhook acts on a dry run", || {
            let run = cluster.dry_run(&pod);
            run.code == 0 && run.value()["spec"]["runtimeClassName"] == "nvidia"
        });
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.server.log()
    }
}

/// A running policy status controller, killed when dropped.
pub struct PolicyStatusController {
    child: std::process::Child,
}

impl Drop for PolicyStatusController {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
