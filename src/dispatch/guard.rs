//! The SSRF guard: which addresses a delivery may connect to.
//!
//! With an API key configured (a server reachable by others), targets resolving to loopback,
//! private, link-local (incl. 169.254.169.254), CGNAT, multicast, unspecified, documentation
//! or other non-global addresses are refused, for IPv4 and IPv6 (incl. IPv4-mapped, NAT64,
//! 6to4 and Teredo addresses, which can carry an IPv4 address of any kind), unless an
//! allowlist CIDR contains them. Without an egress proxy the check runs at connect time
//! inside the HTTP client's DNS resolver, so DNS rebinding cannot slip past a check made
//! earlier; through an egress proxy ([`AddressPolicy::check_host`]) every address the target
//! resolves to must pass before the request is handed to the proxy.
//! In open loopback mode (local development) everything is allowed.
//!
//! A refusal names the target's host, never what a name resolved to: an API client must not
//! be able to map internal DNS through dead-letter errors.

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

    /// The error text for a refused target (also the dead-letter error). `host` is the
    /// target's host as its URL names it: a literal address, or a name whose resolved
    /// addresses are not revealed.
    pub fn refusal(host: impl std::fmt::Display) -> String {
        format!(
            "target {host} is not a public address; deliveries to it are blocked \
             (add its address range to HOOKQ_TARGET_ALLOWLIST to allow it)"
        )
    }

    /// Resolve `host` and check every address it resolves to (for a delivery through an
    /// egress proxy, which resolves the name again itself: one refused address refuses
    /// the target, since which one the proxy will use is unknown).
    pub async fn check_host(&self, host: &str) -> Result<(), String> {
        if !self.block_private {
            return Ok(());
        }
        let resolved = tokio::net::lookup_host((host, 0))
            .await
            .map_err(|_| format!("target {host} did not resolve"))?;
        let mut any = false;
        for addr in resolved {
            if !self.allows(addr.ip()) {
                return Err(Self::refusal(host));
            }
            any = true;
        }
        if any {
            Ok(())
        } else {
            Err(format!("target {host} did not resolve to any address"))
        }
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
            match (allowed.is_empty(), resolved.is_empty()) {
                (false, _) => Ok(Box::new(allowed.into_iter()) as Addrs),
                (true, false) => Err(AddressPolicy::refusal(&host).into()),
                (true, true) => Err(format!("{host} did not resolve to any address").into()),
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
    // 192.88.99.0/24: the 6to4 relay anycast prefix (deprecated; a relay reaches any IPv4).
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
        || (a == 192 && b == 88 && c == 99)         // 6to4 relay anycast
        || a >= 240) // reserved
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
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
        || (segments[0] == 0x2001 && segments[1] == 0) // Teredo 2001::/32: embeds any IPv4
        || (segments[0] == 0x64 && segments[1] == 0xff9b && segments[2] == 1) // local NAT64 64:ff9b:1::/48
        // ::/80 holds IPv4-mapped ::ffff:0:0/96 and IPv4-compatible ::/96: an IPv4 target
        // is named as IPv4, so an IPv6 spelling of one is refused whatever it embeds.
        || segments[..5] == [0, 0, 0, 0, 0]
        || (segments[..4] == [0, 0, 0, 0] && segments[4] == 0xffff)) // IPv4-translated ::ffff:0:0:0/96
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
            "::ffff:8.8.8.8",
            "::ffff:0:808:808",
            "64:ff9b::a00:1",
            "64:ff9b:1::808:808",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "192.88.99.1",
            "2001:db8::1",
            "2002:7f00:1::",
        ] {
            assert!(!is_global(ip(blocked)), "{blocked} should be blocked");
        }
        for allowed in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2001:4860:4860::8888",
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
        assert!(
            !err.contains("127.0.0.1") && !err.contains("::1"),
            "the refusal does not say what the name resolved to: {err}"
        );
    }

    #[tokio::test]
    async fn a_name_checked_for_a_proxy_must_resolve_to_allowed_addresses_only() {
        let policy = AddressPolicy {
            block_private: true,
            allowlist: vec![],
        };
        let err = policy.check_host("localhost").await.unwrap_err();
        assert!(
            err.contains("target localhost is not a public address"),
            "{err}"
        );
        let open = AddressPolicy::default();
        open.check_host("localhost").await.unwrap();
    }
}
