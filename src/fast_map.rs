//! Hash maps whose keys no client chooses (gateway ids, session ids the
//! gateway issued or sealed, names from the config or a backend's lists):
//! foldhash, several times cheaper per lookup than std's SipHash. Maps keyed
//! by what a client picks (its JSON-RPC ids, its token) keep SipHash.

pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
