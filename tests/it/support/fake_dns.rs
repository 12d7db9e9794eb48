//! An in-process DNS server for tests of the registry client's resolver,
//! on `127.0.0.1:<random port>` over UDP (give [`FakeDns::addr`] as the
//! resolver's name server).
//!
//! It answers the A and AAAA questions of the names it is given (absolute
//! names, `nvcr.io.`) and NXDOMAIN to every other name, and it records
//! every question it is asked ([`FakeDns::questions`]), so a test can tell
//! which names the client asked for. Messages are decoded and encoded with
//! hickory-proto, the resolver's own message types.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// One question as the server saw it: the name as asked (`nvcr.io.`) and
/// the record type (`A`, `AAAA`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub name: String,
    pub record_type: String,
}

pub struct FakeDns {
    addr: SocketAddr,
    questions: Arc<Mutex<Vec<Question>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The answer to one message, or None for one that is not a query.
fn answer(
    request: &[u8],
    names: &HashMap<String, Vec<IpAddr>>,
    questions: &Mutex<Vec<Question>>,
) -> Option<Vec<u8>> {
    let request = Message::from_vec(request).ok()?;
    if request.metadata.message_type != MessageType::Query {
        return None;
    }
    let mut response = Message::response(request.metadata.id, request.metadata.op_code);
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    for query in &request.queries {
        let name = query.name().to_string();
        questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Question { name: name.clone(), record_type: query.query_type().to_string() });
        response.add_query(query.clone());
        let Some(addresses) = names.get(&name.to_ascii_lowercase()) else {
            response.metadata.response_code = ResponseCode::NXDomain;
            continue;
        };
        for address in addresses {
            let rdata = match (query.query_type(), address) {
                (RecordType::A, IpAddr::V4(v4)) => RData::A(A(*v4)),
                (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(*v6)),
                _ => continue,
            };
            response.add_answer(Record::from_rdata(query.name().clone(), 60, rdata));
        }
    }
    response.to_vec().ok()
}

impl FakeDns {
    /// A server that answers each of `names` (absolute, lower case) with
    /// its addresses: the A question with the IPv4 ones, AAAA with the
    /// IPv6 ones.
    pub async fn start(names: &[(&str, &[IpAddr])]) -> FakeDns {
        let socket = match UdpSocket::bind("127.0.0.1:0").await {
            Ok(socket) => socket,
            Err(err) => panic!("fake DNS: bind: {err}"),
        };
        let addr = match socket.local_addr() {
            Ok(addr) => addr,
            Err(err) => panic!("fake DNS: local_addr: {err}"),
        };
        let names: HashMap<String, Vec<IpAddr>> = names
            .iter()
            .map(|(name, addresses)| ((*name).to_owned(), addresses.to_vec()))
            .collect();
        let questions = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&questions);
        let task = tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            while let Ok((length, from)) = socket.recv_from(&mut buffer).await {
                let request = buffer.get(..length).unwrap_or_default();
                if let Some(bytes) = answer(request, &names, &recorded) {
                    let _ = socket.send_to(&bytes, from).await;
                }
            }
        });
        FakeDns { addr, questions, task }
    }

    /// Where the server listens: the resolver's name server.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every question asked so far, in order.
    pub fn questions(&self) -> Vec<Question> {
        self.questions.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The names asked so far, each once, in the order first asked.
    pub fn names_asked(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for question in self.questions() {
            if !names.contains(&question.name) {
                names.push(question.name);
            }
        }
        names
    }
}
