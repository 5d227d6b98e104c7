//! `device = "cpu" | "nvidia:N" | "amd:N"`: parsing and naming the device a profile is bound to. Never probes
//! the device: finding who holds it and what it is belongs to `crate::sentry::gpu`.

/// `device = "cpu" | "nvidia:N" | "amd:N"` in a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Nvidia(u32),
    Amd(u32),
}

/// A `device` value that names no device; `given` is the value as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not a device: use \"cpu\", \"nvidia:N\" or \"amd:N\" (N = index)")]
pub struct DeviceError {
    pub given: String,
}

impl Device {
    pub fn parse(s: &str) -> Result<Device, DeviceError> {
        let bad = || DeviceError { given: s.to_owned() };
        if s == "cpu" {
            return Ok(Device::Cpu);
        }
        let (kind, index) = s.split_once(':').ok_or_else(bad)?;
        let index: u32 = index.parse().map_err(|_| bad())?;
        match kind {
            "nvidia" => Ok(Device::Nvidia(index)),
            "amd" => Ok(Device::Amd(index)),
            _ => Err(bad()),
        }
    }

    pub fn is_gpu(&self) -> bool {
        !matches!(self, Device::Cpu)
    }

    /// What a spawned server's environment needs so that it sees this device alone, as device 0. NVIDIA: CUDA
    /// numbers devices fastest-first unless told `PCI_BUS_ID`, while NVML (the busy wait, the identity) numbers
    /// them by bus id; with the order pinned, `nvidia:N` is the same GPU to both. AMD: ROCr enumerates the KFD
    /// topology's GPU nodes in the order the sentry reads them, and HIP numbers what ROCr leaves visible from 0
    /// (an ambient `HIP_VISIBLE_DEVICES` would otherwise select within that one device). Without this a server with no device flag uses
    /// every GPU of the host (llama.cpp splits its layers across them), and a second profile bound to the other
    /// GPU finds it busy.
    pub fn visibility_environment(&self) -> Vec<(String, String)> {
        match self {
            Device::Cpu => Vec::new(),
            Device::Nvidia(i) => {
                vec![("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()), ("CUDA_VISIBLE_DEVICES".into(), i.to_string())]
            }
            Device::Amd(i) => {
                vec![("ROCR_VISIBLE_DEVICES".into(), i.to_string()), ("HIP_VISIBLE_DEVICES".into(), "0".into())]
            }
        }
    }

    pub fn label(&self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Nvidia(i) => format!("nvidia:{i}"),
            Device::Amd(i) => format!("amd:{i}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_of_no_known_kind_is_refused_with_the_value_given() {
        assert_eq!(Device::parse("amd:3"), Ok(Device::Amd(3)));
        for bad in ["tpu:0", "nvidia:", "nvidia:-1", "gpu"] {
            assert_eq!(Device::parse(bad), Err(DeviceError { given: bad.to_owned() }));
        }
    }
}
