//! The SSRF guard: which addresses a delivery may connect to.
//!
//! With an API key configured (a server reachable by others), targets resolving to loopback,
//! private, link-local (incl. 169.254.169.254), CGNAT, multicast, unspecified, documentation
//! or other non-global addresses are refused, for IPv4 and IPv6 (incl. IPv4-mapped and NAT64
//! addresses), unless an allowlist CIDR contains them. The check runs at connect time inside
//! the HTTP client's DNS resolver, so DNS rebinding cannot slip past a check made earlier.
//! In open loopback mode (local development) everything is allowed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Which target addresses deliveries may reach.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    /// Refuse non-global addresses (outside the allowlist).
    pub block_private: bool,
    pub allowlist: Vec<IpNet>,
}

impl AddressPolicy {
    pub fn allows(&self, ip: IpAddr) -> bool {
        !self.block_private || is_global(ip) || self.allowlist.iter().any(|net| net.contains(&ip))
    }

    /// The error text for a refused address (also the dead-letter error).
    pub fn refusal(ip: IpAddr) -> String {
        format!(
            "target address {ip} is not a public address; deliveries to it are blocked \
             (add it to HOOKQ_TARGET_ALLOWLIST to allow it)"
        )
    }
}

/// A DNS resolver that drops the addresses the policy refuses, and fails if none remain.
pub struct GuardedResolver {
    pub policy: Arc<AddressPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|addr| policy.allows(addr.ip()))
                .collect();
            match (allowed.is_empty(), resolved.first()) {
                (false, _) => Ok(Box::new(allowed.into_iter()) as Addrs),
                (true, Some(refused)) => Err(AddressPolicy::refusal(refused.ip()).into()),
                (true, None) => Err(format!("{host} did not resolve to any address").into()),
            }
        })
    }
}

/// Whether `ip` is a globally routable unicast address.
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0                                   // "this network"
        || (a == 100 && (64..128).contains(&b))     // CGNAT 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0)           // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b))      // benchmarking 198.18.0.0/15
        || a >= 240) // reserved
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_global_v4(v4);
    }
    let segments = ip.segments();
    // NAT64 (64:ff9b::/96) embeds an IPv4 address: judge that address.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [a, b] = segments[6].to_be_bytes();
        let [c, d] = segments[7].to_be_bytes();
        return is_global_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (segments[0] & 0xfe00) == 0xfc00          // unique local fc00::/7
        || (segments[0] & 0xffc0) == 0xfe80          // link-local fe80::/10
        || (segments[0] & 0xffc0) == 0xfec0          // site-local (deprecated) fec0::/10
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation
        || (segments[0] == 0x0100 && segments[1..4] == [0, 0, 0]) // discard 100::/64
        || segments[0] == 0x2002                     // 6to4: may embed any IPv4
        || segments[..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible (deprecated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_global_addresses_are_recognised() {
        for blocked in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2001:db8::1",
            "2002:7f00:1::",
        ] {
            assert!(!is_global(ip(blocked)), "{blocked} should be blocked");
        }
        for allowed in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(is_global(ip(allowed)), "{allowed} should be allowed");
        }
    }

    #[test]
    fn the_allowlist_opens_blocked_ranges_and_open_mode_allows_all() {
        let guarded = AddressPolicy {
            block_private: true,
            allowlist: vec!["10.0.0.0/8".parse().unwrap()],
        };
        assert!(guarded.allows(ip("10.9.9.9")));
        assert!(!guarded.allows(ip("192.168.0.1")));
        assert!(guarded.allows(ip("8.8.8.8")));
        assert!(AddressPolicy::default().allows(ip("127.0.0.1")));
    }

    #[tokio::test]
    async fn the_resolver_refuses_a_name_that_resolves_only_to_blocked_addresses() {
        let resolver = GuardedResolver {
            policy: Arc::new(AddressPolicy {
                block_private: true,
                allowlist: vec![],
            }),
        };
        let name: Name = "localhost".parse().unwrap();
        let err = match resolver.resolve(name).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(err) => err.to_string(),
        };
        assert!(err.contains("not a public address"), "{err}");
    }
}
