//! What the system bus's news mean to a watch: each [`BusEvent`] the
//! provider's follower hears (`provider::systemd::bus::follow`: the managed
//! units' signals on a connection of its own, each checked to come from
//! systemd) is one [`Wake`], and a wake only says which policies to run.

pub(crate) use crate::provider::UnitFollower;

use super::wake::Wake;
use crate::provider::BusEvent;

impl From<BusEvent> for Wake {
    fn from(event: BusEvent) -> Self {
        match event {
            BusEvent::Unit(unit) => Wake::Unit(unit),
            BusEvent::Reloaded => Wake::Reloaded,
            BusEvent::Missed(why) => Wake::Missed(why),
        }
    }
}
