//! Images as the policy reads them: which images of an object are GPU
//! images (looked up in registries before the rules run), and where the
//! registry's answers enter the evaluation ([`ImageFacts`]).

pub mod gpu_images;

use crate::cuda::ImageNeeds;

/// Where resolved images are looked up before the table: the registry half's cache; never waits.
pub trait ImageFacts: Send + Sync {
    /// What the image needs, when it has been resolved; None sends the rule to the table.
    fn image_needs(&self, image: &str) -> Option<ImageNeeds>;

    /// Why the image could not be resolved, when a lookup gave no usable
    /// answer (one short line): the table applies, and the rule says so.
    fn fallback(&self, _image: &str) -> Option<&str> {
        None
    }
}
