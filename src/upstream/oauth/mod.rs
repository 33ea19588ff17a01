//! sluice as an OAuth client of a backend (`oauth.flow =
//! "authorization_code"`): each principal consents once, in a browser, and
//! the gateway keeps that principal's grant for that backend (issue 50,
//! parts 2 and 3).
//!
//! This module holds the flow's pieces with no I/O, each with its tests:
//! where the authorization server is (`discovery`), who the gateway is
//! there (`client`: configured, or registered by RFC 7591), PKCE (`pkce`),
//! the sealed `state` that carries a flow from its start to the callback
//! (`state`), the requests and answers of the token endpoint (`token`) and
//! the grants kept per backend (`grants`), the start ids waiting to be
//! opened (`starts`) and what replicas share in cluster mode, grants sealed
//! (`store`); then the HTTP requests that join them (`fetch`) and one
//! backend's flow at run time (`flow`), which the front's `/oauth/*`
//! endpoints and a principal's calls use.

mod backend_grants;
mod client;
mod discovery;
mod fetch;
mod flow;
mod grants;
mod pkce;
mod starts;
mod state;
mod store;
mod token;

pub(crate) use client::{ClientIdentity, metadata_document, registration_request};
pub(crate) use discovery::{
    Challenge, ResourceMetadata, ServerMetadata, resource_metadata_urls, server_metadata_urls,
};
pub(crate) use flow::{CodeFlow, Refused};
pub(crate) use grants::{Connection, Grant, Grants};
pub(crate) use pkce::Pkce;
pub(crate) use state::{FLOW_TTL, FlowState, FlowStates, StateRefused};
pub(crate) use store::{GrantStore, TakenStart};
pub(crate) use token::{AuthorizationRequest, TokenForm, read_token_answer};
