//! The form of an extended resource name, as the API server validates it
//! (apimachinery `IsQualifiedName` with a required prefix): `domain/name`, the domain a
//! DNS subdomain, the name 1–63 of `[A-Za-z0-9._-]` with a letter or digit at both ends.

use topoalign_dra::publish::dns_label_problem;

/// Why `s` is not an extended resource name, or `Ok`.
pub(crate) fn check_resource_name(s: &str) -> Result<(), String> {
    let Some((domain, name)) = s.split_once('/') else {
        return Err("expected domain/name (an extended resource name such as amd.com/gpu)".into());
    };
    if domain.is_empty() || domain.len() > 253 {
        return Err(format!(
            "the domain must have 1 to 253 characters, not {}",
            domain.len()
        ));
    }
    for part in domain.split('.') {
        if let Some(why) = dns_label_problem(part) {
            return Err(format!("domain part {part:?}: {why}"));
        }
    }
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "the name after '/' must have 1 to 63 characters, not {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "character {c:?} is not allowed after '/' (letters, digits, '-', '_', '.')"
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err("the name after '/' must start and end with a letter or digit".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_api_server_takes_them() {
        for ok in [
            "amd.com/gpu",
            "nvidia.com/mig-1g.10gb",
            "rdma/hca_shared_devices_a",
            "topoalign.dev/gpu-nic-pair",
        ] {
            assert_eq!(check_resource_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "gpu",
            "/gpu",
            "amd.com/",
            "AMD.com/gpu",
            "amd.com/gpu-",
            "amd.com/g pu",
            "amd.com/a/b",
        ] {
            assert!(check_resource_name(bad).is_err(), "{bad}");
        }
    }
}
