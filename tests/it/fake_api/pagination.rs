//! Paged lists: `limit` and `continue` as the real server answers them, so
//! kube's watcher pages through a large kind 500 objects at a time.

use super::*;

fn pod(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn names<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(ResourceExt::name_any).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_pages_a_list_and_continue_resumes_it() {
    let fake = FakeApi::start().await;
    for name in ["a", "b", "c", "d", "e", "f", "g"] {
        fake.insert(namespace(name));
    }
    for (ns, name) in [("a", "p1"), ("b", "p1"), ("b", "p2"), ("b", "p3"), ("c", "p1")] {
        fake.insert(pod(ns, name));
    }
    let namespaces = Api::<Namespace>::all(fake.client());

    let first = within("page 1", namespaces.list(&ListParams::default().limit(3))).await.unwrap();
    assert_eq!(names(&first.items), ["a", "b", "c"]);
    let rv = first.metadata.resource_version.clone();
    let token = first.metadata.continue_.clone().expect("more pages");

    // Pages read as of the first: a namespace added meanwhile is listed,
    // and the resourceVersion stays the first page's.
    fake.insert(namespace("cc"));
    let second =
        within("page 2", namespaces.list(&ListParams::default().limit(3).continue_token(&token)))
            .await
            .unwrap();
    assert_eq!(names(&second.items), ["cc", "d", "e"]);
    assert_eq!(second.metadata.resource_version, rv);
    let token = second.metadata.continue_.clone().expect("more pages");
    let last =
        within("page 3", namespaces.list(&ListParams::default().limit(3).continue_token(&token)))
            .await
            .unwrap();
    assert_eq!(names(&last.items), ["f", "g"]);
    assert_eq!(last.metadata.continue_.filter(|t| !t.is_empty()), None);

    // A namespaced list pages within its namespace only.
    let pods = Api::<Pod>::namespaced(fake.client(), "b");
    let page = within("pods page 1", pods.list(&ListParams::default().limit(2))).await.unwrap();
    assert_eq!(names(&page.items), ["p1", "p2"]);
    let token = page.metadata.continue_.expect("more pods");
    let page =
        within("pods page 2", pods.list(&ListParams::default().limit(2).continue_token(&token)))
            .await
            .unwrap();
    assert_eq!(names(&page.items), ["p3"]);
    assert_eq!(page.metadata.continue_.filter(|t| !t.is_empty()), None);

    // A token from before a compaction has expired; a forged one is invalid.
    fake.compact();
    let expired = ListParams::default().limit(3).continue_token(&token);
    assert_eq!(
        api_error(within("expired", namespaces.list(&expired)).await),
        (410, "Expired".to_owned())
    );
    let forged = ListParams::default().continue_token("not-a-token");
    assert_eq!(
        api_error(within("forged", namespaces.list(&forged)).await),
        (400, "BadRequest".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_pages_through_its_first_list() {
    let fake = FakeApi::start().await;
    let all: Vec<String> = (0..7).map(|i| format!("ns-{i}")).collect();
    for name in &all {
        fake.insert(namespace(name));
    }
    let reflected = Reflected::start(fake.client(), watcher::Config::default().page_size(2));
    let expected: Vec<&str> = all.iter().map(String::as_str).collect();
    reflected.converges_to(&expected).await;
    // 7 namespaces, 2 a page.
    assert_eq!(namespace_lists(&fake), 4, "{:#?}", fake.requests());
    fake.insert(namespace("late"));
    let mut expected = expected;
    expected.push("late");
    reflected.converges_to(&expected).await;
}
