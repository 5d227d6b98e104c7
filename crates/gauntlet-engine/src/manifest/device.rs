//! `device = "cpu" | "nvidia:N" | "amd:N"`: parsing and naming the device a profile is bound to. Never probes
//! the device: finding who holds it and what it is belongs to `crate::sentry::gpu`.

/// `device = "cpu" | "nvidia:N" | "amd:N"` in a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Nvidia(u32),
    Amd(u32),
}

impl Device {
    pub fn parse(s: &str) -> Result<Device, String> {
        let bad = || format!("`{s}` is not a device: use \"cpu\", \"nvidia:N\" or \"amd:N\" (N = index)");
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

    pub fn label(&self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Nvidia(i) => format!("nvidia:{i}"),
            Device::Amd(i) => format!("amd:{i}"),
        }
    }
}
