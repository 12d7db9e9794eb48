//! The HTTP side of the distribution protocol, for a registry that may be
//! hostile. oci-client reads every body whole, follows redirects anywhere
//! and connects wherever a name resolves, so the three requests a lookup
//! makes (a manifest by tag or digest, its digest alone, a blob) go
//! through this reqwest client instead: every body read as it streams and
//! dropped at its [`Bound`]; connections only where [`HostPolicy`] admits;
//! redirects followed here, each target checked, credentials and tokens
//! sent to the registry's own origin only; no proxy from the environment,
//! no `Referer`, no decompression. The bearer-token handshake is the
//! distribution spec's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use reqwest::header::{ACCEPT, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use serde::Deserialize;

use super::credentials::Credentials;
use super::digest::Digest;
use super::dns::Dns;
use super::error::RegistryError;
use super::hosts::{AddressRefused, HostPolicy, origin_of};
use super::lookup::Failure;
use super::lookup_cache::{BoundedLru, lock, string_bytes};
use super::oci::MANIFEST_ACCEPT;
use super::reason::error_text;
use crate::manifest::one_line;

/// A token answer is a few kilobytes of JSON: a registry's bearer token
/// is a JWT of one to a few KB (Docker Hub's, some 1.5 KB, is sent twice,
/// as `token` and `access_token`). The token kept is at most this long.
pub const MAX_TOKEN_BYTES: u64 = 16 << 10;
/// What is read of an error answer, for its message.
const MAX_ERROR_BYTES: usize = 4 << 10;
/// Registries send blobs to a CDN once; more hops are not a registry's.
pub(super) const MAX_REDIRECTS: usize = 3;
/// Tokens kept, one per registry and repository.
const TOKEN_CACHE_ENTRIES: usize = 256;
/// The bytes the kept tokens may take: the entries' keys and tokens, as
/// [`BoundedLru`] charges them. Ordinary tokens (~2 KB with their key)
/// fill the entries first; tokens of [`MAX_TOKEN_BYTES`] fill it at some 60.
const TOKEN_CACHE_BYTES: usize = 1 << 20;
/// A token that says nothing of its lifetime lasts 60 s (the token spec);
/// none is kept longer than 5 minutes.
const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(60);
const MAX_TOKEN_TTL: Duration = Duration::from_secs(300);

/// How much of one kind of document is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bound {
    what: &'static str,
    bytes: u64,
    /// The size the referring document declared, when it is the bound.
    declared: bool,
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

impl Bound {
    /// The OCI distribution spec's limit for manifests and indexes.
    pub(super) const MANIFEST: Bound = Bound::of("manifest", 4 << 20);
    /// Image configs are a few kilobytes; the same bound as manifests.
    pub(super) const CONFIG: Bound = Bound::of("image config", 4 << 20);
    const TOKEN: Bound = Bound::of("token answer", MAX_TOKEN_BYTES);

    const fn of(what: &'static str, bytes: u64) -> Self {
        Self { what, bytes, declared: false }
    }

    /// This bound, or the size a descriptor declares when it is smaller: a
    /// document longer than declared is not the one described. A declared
    /// size above the bound is refused before anything is read.
    pub(super) fn declared(self, size: i64) -> Result<Self, Failure> {
        let size = u64::try_from(size).unwrap_or(0);
        if size > self.bytes {
            return Err(Failure::too_large(format!(
                "{} of {} declared, larger than {}",
                self.what,
                human(size),
                human(self.bytes)
            )));
        }
        Ok(Self { bytes: size, declared: true, ..self })
    }

    fn exceeded(&self) -> Failure {
        Failure::too_large(if self.declared {
            format!("{} larger than the {} its descriptor declares", self.what, human(self.bytes))
        } else {
            format!("{} larger than {}", self.what, human(self.bytes))
        })
    }
}

/// `Docker-Content-Digest` as sent, and the body.
pub(super) struct Fetched {
    pub(super) digest_header: Option<String>,
    pub(super) body: Vec<u8>,
}

fn digest_header(response: &Response) -> Option<String> {
    response
        .headers()
        .get("docker-content-digest")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// `request` proving who it is as `auth` says.
fn authorize(request: RequestBuilder, auth: &RegistryAuth) -> RequestBuilder {
    match auth {
        RegistryAuth::Bearer(token) => request.bearer_auth(token),
        RegistryAuth::Basic(user, password) => request.basic_auth(user, Some(password)),
        RegistryAuth::Anonymous => request,
    }
}

/// The token answer's fields (the token spec names the token either way).
#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// The error a registry's answer body carries (`{"errors": [...]}`).
#[derive(Deserialize)]
struct ErrorAnswer {
    #[serde(default)]
    errors: Vec<ErrorEntry>,
}

#[derive(Deserialize)]
struct ErrorEntry {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub(super) connect: Duration,
    pub(super) read: Duration,
}

type TokenKey = (String, String);

type Tokens = BoundedLru<TokenKey, (String, Instant)>;

pub(super) struct Transport {
    http: reqwest::Client,
    hosts: Arc<HostPolicy>,
    credentials: Credentials,
    tokens: Mutex<Tokens>,
}

fn token_cache() -> Tokens {
    BoundedLru::new(TOKEN_CACHE_ENTRIES, TOKEN_CACHE_BYTES, |(registry, repository), (token, _)| {
        string_bytes(registry)
            .saturating_add(string_bytes(repository))
            .saturating_add(string_bytes(token))
    })
}

/// A reqwest error as one line, after the origin it was about; the
/// resolver's refusal becomes a refusal.
fn transport_failure(url: &Url, err: &reqwest::Error) -> Failure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut innermost = err.to_string();
    while let Some(current) = source {
        if let Some(refused) = current.downcast_ref::<AddressRefused>() {
            return Failure::refused(refused.0.clone());
        }
        innermost = current.to_string();
        source = current.source();
    }
    let origin = origin_of(url);
    if err.is_timeout() {
        Failure::failed(format!("no answer from {origin} in time"))
    } else if err.is_connect() {
        Failure::failed(format!("cannot connect to {origin}: {}", one_line(&innermost)))
    } else {
        Failure::failed(format!("{origin}: {}", one_line(&innermost)))
    }
}

/// Reads a body as it streams, at most `bound`; past it the response is
/// dropped, and with it the connection.
async fn read_bounded(mut response: Response, bound: Bound, url: &Url) -> Result<Vec<u8>, Failure> {
    if response.content_length().is_some_and(|length| length > bound.bytes) {
        return Err(bound.exceeded());
    }
    let start = response.content_length().unwrap_or(0).min(64 << 10);
    let mut body = Vec::with_capacity(usize::try_from(start).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(|err| transport_failure(url, &err))? {
        if (body.len() + chunk.len()) as u64 > bound.bytes {
            return Err(bound.exceeded());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An answer that is not a success, as one line: the status and the
/// registry's first error, read from at most 4 KiB of its body.
async fn status_failure(mut response: Response) -> Failure {
    let status = response.status();
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_ERROR_BYTES - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    let detail = serde_json::from_slice::<ErrorAnswer>(&body)
        .ok()
        .and_then(|answer| answer.errors.into_iter().next())
        .map(|entry| {
            let text = one_line(&format!("{}: {}", entry.code, entry.message));
            let short: String = text.chars().take(200).collect();
            format!(" ({short})")
        })
        .unwrap_or_default();
    Failure::failed(format!("{status}{detail}"))
}

impl Transport {
    pub(super) fn new(
        hosts: Arc<HostPolicy>,
        dns: &Dns,
        credentials: Credentials,
        timeouts: Timeouts,
    ) -> Result<Self, RegistryError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .referer(false)
            .dns_resolver(hosts.resolver(dns))
            .connect_timeout(timeouts.connect)
            .read_timeout(timeouts.read)
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(2)
            .user_agent(concat!("gpu-policy/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| RegistryError::Client(one_line(&err.to_string())))?;
        Ok(Self { http, hosts, credentials, tokens: Mutex::new(token_cache()) })
    }

    pub(super) async fn manifest(
        &self,
        reference: &Reference,
        tag_or_digest: &str,
        bound: Bound,
    ) -> Result<Fetched, Failure> {
        let path = format!("manifests/{tag_or_digest}");
        let (response, url) =
            self.send(reference, Method::GET, &path, Some(MANIFEST_ACCEPT)).await?;
        let digest_header = digest_header(&response);
        let body = read_bounded(response, bound, &url).await?;
        Ok(Fetched { digest_header, body })
    }

    /// The digest the tag names now, when the registry says it.
    pub(super) async fn manifest_digest(
        &self,
        reference: &Reference,
        tag: &str,
    ) -> Result<Option<String>, Failure> {
        let path = format!("manifests/{tag}");
        let (response, _) =
            self.send(reference, Method::HEAD, &path, Some(MANIFEST_ACCEPT)).await?;
        Ok(digest_header(&response))
    }

    pub(super) async fn blob(
        &self,
        reference: &Reference,
        digest: &Digest,
        bound: Bound,
    ) -> Result<Vec<u8>, Failure> {
        let path = format!("blobs/{}", digest.as_str());
        let (response, url) = self.send(reference, Method::GET, &path, None).await?;
        read_bounded(response, bound, &url).await
    }

    async fn send(
        &self,
        reference: &Reference,
        method: Method,
        path: &str,
        accept: Option<&str>,
    ) -> Result<(Response, Url), Failure> {
        self.hosts.check_registry(reference.registry())?;
        let registry = reference.resolve_registry();
        let text = format!(
            "{}://{registry}/v2/{}/{path}",
            self.hosts.scheme_for(registry),
            reference.repository()
        );
        let url = Url::parse(&text)
            .map_err(|err| Failure::failed(format!("{text:?} is not a URL: {err}")))?;
        self.hosts.check_url(&url)?;
        let key: TokenKey = (registry.to_owned(), reference.repository().to_owned());
        let mut authorization = self.cached_token(&key).map(RegistryAuth::Bearer);
        let mut challenged = false;
        loop {
            let response =
                self.follow(method.clone(), &url, accept, authorization.as_ref()).await?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !challenged {
                challenged = true;
                authorization = Some(self.answer(&response, reference, &key).await?);
                continue;
            }
            if !status.is_success() {
                return Err(status_failure(response).await);
            }
            return Ok((response, url));
        }
    }

    /// Sends `method` to `url` and follows its redirects, each target
    /// checked first; `authorization` goes to `url`'s origin only.
    async fn follow(
        &self,
        method: Method,
        url: &Url,
        accept: Option<&str>,
        authorization: Option<&RegistryAuth>,
    ) -> Result<Response, Failure> {
        let origin = url.origin();
        let mut current = url.clone();
        for hop in 0..=MAX_REDIRECTS {
            let mut request = self.http.request(method.clone(), current.clone());
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if let Some(authorization) = authorization
                && current.origin() == origin
            {
                request = authorize(request, authorization);
            }
            let response = request.send().await.map_err(|err| transport_failure(&current, &err))?;
            let location = response.headers().get(LOCATION).and_then(|value| value.to_str().ok());
            let Some(location) = location.filter(|_| response.status().is_redirection()) else {
                return Ok(response);
            };
            if hop == MAX_REDIRECTS {
                return Err(Failure::failed(format!(
                    "more than {MAX_REDIRECTS} redirects from {}",
                    origin_of(url)
                )));
            }
            let next = current
                .join(location)
                .map_err(|_| Failure::failed("a redirect to something that is not a URL"))?;
            self.hosts
                .check_url(&next)
                .map_err(|refusal| Failure::refused(format!("redirect to {}", refusal.reason)))?;
            current = next;
        }
        Err(Failure::failed("too many redirects"))
    }

    fn cached_token(&self, key: &TokenKey) -> Option<String> {
        let mut tokens = lock(&self.tokens);
        match tokens.get(key) {
            Some((token, until)) if Instant::now() < *until => Some(token.clone()),
            Some(_) => {
                tokens.pop(key);
                None
            }
            None => None,
        }
    }

    /// A bearer token from the realm, or the registry's basic credentials.
    async fn answer(
        &self,
        response: &Response,
        reference: &Reference,
        key: &TokenKey,
    ) -> Result<RegistryAuth, Failure> {
        let basic = Some(self.credentials.auth_for(reference.registry()))
            .filter(|auth| matches!(auth, RegistryAuth::Basic(..)));
        let mut bearer: Option<(String, Option<String>)> = None;
        let mut wants_basic = false;
        for header in response.headers().get_all(WWW_AUTHENTICATE) {
            let Ok(text) = header.to_str() else { continue };
            for challenge in http_auth::parser::ChallengeParser::new(text).flatten() {
                let param = |name: &str| {
                    challenge
                        .params
                        .iter()
                        .find(|(key, _)| key.eq_ignore_ascii_case(name))
                        .map(|(_, value)| value.to_unescaped())
                };
                if challenge.scheme.eq_ignore_ascii_case("bearer") {
                    if let Some(realm) = param("realm") {
                        bearer.get_or_insert((realm, param("service")));
                    }
                } else if challenge.scheme.eq_ignore_ascii_case("basic") {
                    wants_basic = true;
                }
            }
        }
        if let Some((realm, service)) = bearer {
            let (token, lifetime) =
                self.token(&realm, service.as_deref(), reference, basic).await?;
            if let Some(until) = Instant::now().checked_add(lifetime) {
                lock(&self.tokens).put(key.clone(), (token.clone(), until));
            }
            return Ok(RegistryAuth::Bearer(token));
        }
        match basic {
            Some(basic) if wants_basic => Ok(basic),
            _ => Err(Failure::failed("401 Unauthorized, and no credentials for this registry")),
        }
    }

    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        reference: &Reference,
        basic: Option<RegistryAuth>,
    ) -> Result<(String, Duration), Failure> {
        let mut url = Url::parse(realm).map_err(|_| {
            let shown: String = realm.chars().take(100).collect();
            Failure::failed(format!("token realm {shown:?} is not a URL"))
        })?;
        self.hosts
            .check_url(&url)
            .map_err(|refusal| Failure::refused(format!("token realm {}", refusal.reason)))?;
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("scope", &format!("repository:{}:pull", reference.repository()));
            if let Some(service) = service {
                query.append_pair("service", service);
            }
        }
        // The registry's credentials go to a realm the operator listed.
        let basic = basic.filter(|_| self.hosts.is_listed(&url));
        let response = self.follow(Method::GET, &url, None, basic.as_ref()).await?;
        if !response.status().is_success() {
            let failure = status_failure(response).await;
            return Err(Failure::failed(format!(
                "token from {}: {}",
                origin_of(&url),
                failure.reason
            )));
        }
        let body = read_bounded(response, Bound::TOKEN, &url).await?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|err| {
            Failure::failed(format!(
                "token from {}: not a token answer: {}",
                origin_of(&url),
                error_text(&err)
            ))
        })?;
        let value = answer
            .token
            .or(answer.access_token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Failure::failed(format!("token from {}: no token in the answer", origin_of(&url)))
            })?;
        let lifetime =
            answer.expires_in.map_or(DEFAULT_TOKEN_TTL, Duration::from_secs).min(MAX_TOKEN_TTL);
        Ok((value, lifetime))
    }
}

#[cfg(test)]
mod tests;
