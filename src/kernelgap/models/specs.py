"""What a model is: one spec per kind, and what of it a run id hashes (docs/theory.md, "The models").

:data:`ModelSpec` is a union tagged by ``kind``: :class:`KernelSpec` (kernel attention with a
registered feature map), :class:`SoftmaxSpec` (dense softmax) and :class:`ModuleModelSpec` (a
module written elsewhere, :mod:`.external`).  Each holds only the fields its model is built
from (:func:`~kernelgap.models.build.build_model`), so a spec's fields are its identity: equal
models have equal specs whatever a sweep file wrote for the other kinds.  A kernel spec
resolves its feature map's class once, when it is made (:attr:`KernelSpec.map_class`).

A spec's defaults are the calibrated training recipe (docs/experiments.md, "Training
recipe").  What the trainer asks of a model it asks of the spec, a kernel spec of its map.
A kernel spec imports the feature maps (and torch) only once its other fields are valid.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, PrivateAttr, ValidationInfo, WrapValidator, model_validator
from pydantic.fields import FieldInfo

from ..errors import ConfigError, KernelgapError
from ..validation import Config, FinitePositive, PositiveInt, invalid, one_of
from .module_spec import ModuleSpec

if TYPE_CHECKING:
    from .feature_maps import FeatureMap

#: Validation context key: check a spec's fields alone, without resolving a kernel's map (torch).
FIELDS_ONLY = "fields_only"
READOUTS = ("linear", "mlp")
KINDS = ("kernel", "softmax", "module")

Rank = Annotated[PositiveInt, Field(description="feature rank r: features per head (kernel), or the module's rank")]
Heads = Annotated[PositiveInt, Field(description="attention heads")]
DValue = Annotated[PositiveInt, Field(description="value width (default: 32, or the family's overlap rank if larger)")]
ReadoutName = Annotated[
    one_of(READOUTS), Field(description="value/readout maps: mlp or linear (default: a kernel map's recipe, else mlp)")
]
Hidden = Annotated[PositiveInt, Field(description="hidden width of the MLPs")]
PositionDependent = Annotated[bool, Field(description="a key map per key position")]
Causal = Annotated[bool, Field(description="position i attends to positions 1..i")]
Temperature = Annotated[
    FinitePositive,
    Field(
        description="score temperature τ; a log-space map's divides its log-features (default: kernel 1, softmax 4, sized)"
    ),
]
InitScale = Annotated[FinitePositive, Field(description="initial scale of the parameters")]
KIND_TEXT = "kernel (kernel attention), softmax (dense softmax) or module (a module written elsewhere)"
#: Initial scale of the parameters (at 1.0 the kernels start nearly flat and training stalls).
INIT_SCALE = 2.0
#: Adam learning rates of dense softmax and of a module (``FeatureMap.default_lr``'s value).
SOFTMAX_LR = 5e-3
FALLBACK_LR = 3e-3


class BaseSpec(Config):
    """What every model spec shares, and what the trainer asks of a model, as a model without a
    feature map answers (a kernel spec asks its map; ``signed_kernel``: not ``nonnegative``)."""

    model_config = ConfigDict(frozen=True)
    WHERE: ClassVar[str] = "model"
    default_lr: ClassVar[float] = FALLBACK_LR
    #: A module written elsewhere: it trains alone, its size unknown before it is built.
    built_elsewhere: ClassVar[bool] = False
    restartable: ClassVar[bool] = True
    target: ClassVar[str | None] = None
    signed_kernel: ClassVar[bool] = False
    log_space: ClassVar[bool] = False
    maskable: ClassVar[bool] = False
    distillable: ClassVar[bool] = False
    prunable: ClassVar[bool] = False
    recipe_prune_from: ClassVar[float] = 1.0
    projection: ClassVar[str | None] = None
    recipe_schedule: ClassVar[dict] = {}
    map_facts: ClassVar[dict | None] = None

    def identity(self) -> dict:
        """The fields its model is built from (what a run id hashes)."""
        return self.model_dump()

    @property
    def stack_rank(self) -> int | None:
        """The rank a stack pads its members to (None for dense softmax)."""
        return getattr(self, "rank", None)

    def feature_count(self) -> int | None:
        """Total features used (a kernel's ``H · r``; None for dense softmax)."""
        return self.stack_rank

    @property
    def attention_shape(self) -> tuple[int, bool, bool]:
        """Heads, position dependence and causal mask."""
        return self.heads, self.position_dependent, self.causal


class KernelSpec(BaseSpec):
    """Kernel attention ``α(x, z) = <φ_Q(x), φ_K(z)>`` with a registered feature map ``φ``
    (:mod:`.feature_maps`); the fields it is not given that its map's ``recipe_model`` sets
    take the map's values."""

    kind: Literal["kernel"] = Field("kernel", description=KIND_TEXT)
    feature_map: str = Field("table", description="a registered feature map of a kernel model")
    rank: Rank = 16
    heads: Heads = 1
    d_value: DValue = 32
    readout: ReadoutName = "mlp"
    hidden: Hidden = 64
    position_dependent: PositionDependent = False
    causal: Causal = False
    temperature: Temperature = 1.0
    init_scale: InitScale = INIT_SCALE
    _map: type[FeatureMap] = PrivateAttr()
    default_lr = property(lambda self: self._map.default_lr)
    signed_kernel = property(lambda self: not self._map.nonnegative)
    log_space = property(lambda self: self._map.log_space)
    maskable = property(lambda self: self._map.maskable)
    distillable = property(lambda self: self._map.distillable)
    prunable = property(lambda self: self._map.prunable)
    recipe_prune_from = property(lambda self: self._map.recipe_prune_from)
    projection = property(lambda self: self._map.projection)
    recipe_schedule = property(lambda self: self._map.recipe_schedule)
    map_facts = property(lambda self: self._map.facts())

    @model_validator(mode="after")
    def _resolve_map(self, info: ValidationInfo) -> KernelSpec:
        if (info.context or {}).get(FIELDS_ONLY):
            return self  # a check of the fields alone: the map is not resolved
        from .feature_maps import feature_map_class  # torch: once every other field is valid

        try:
            self._map = feature_map_class(self.feature_map)
        except KernelgapError as exc:
            raise invalid(str(exc), path="feature_map") from None
        recipe = {k: v for k, v in self._map.recipe_model.items() if k not in self.model_fields_set}
        self.__dict__.update(recipe)  # frozen: the recipe's values, as if they were the defaults
        return self

    @property
    def map_class(self) -> type[FeatureMap]:
        """The feature map's class (resolved once, when the spec was made)."""
        return self._map

    def identity(self) -> dict:
        """Its fields; a linear-space map's without ``temperature`` (the scorer ignores it)."""
        out = self.model_dump()
        if not self._map.log_space:
            del out["temperature"]
        return out

    def feature_count(self) -> int:
        return self.heads * self._map.output_size(self.rank)

    def scorer(self, m: int, ranks: list[int], key_positions: int, vocabulary=None):
        """Its stacked scorer, one member per entry of ``ranks`` on ``m``-bit tokens."""
        from .scorers import KernelScorer

        fm = self._map.build(m, max(ranks), len(ranks) * self.heads, self.heads)
        fields = self.model_dump(include={"heads", "hidden", "init_scale", "temperature"})
        return KernelScorer(
            feature_map=fm, ranks=ranks, m=m, key_positions=key_positions, vocabulary=vocabulary, **fields
        )


class SoftmaxSpec(BaseSpec):
    """Dense softmax ``log α(x, z) = <q(x), k(z)> / τ`` with ``q, k ∈ R^d`` (``d = score_dim``,
    default the token width m); ``scaled_scores`` divides by ``τ·√d`` instead.  The defaults,
    ``τ·√d`` with τ = 4: attention starts near uniform and the scorer trains slower than the
    readout, which it needs to find the good candidates."""

    default_lr: ClassVar[float] = SOFTMAX_LR
    kind: Literal["softmax"] = Field("softmax", description=KIND_TEXT)
    heads: Heads = 1
    d_value: DValue = 32
    readout: ReadoutName = "mlp"
    hidden: Hidden = 64
    position_dependent: PositionDependent = False
    causal: Causal = False
    score_dim: PositiveInt | None = Field(None, description="softmax d (default m)")
    temperature: Temperature = 4.0
    scaled_scores: bool = Field(True, description="softmax: divide scores by τ·√d instead of τ")
    init_scale: InitScale = INIT_SCALE

    def scorer(self, m: int, ranks: list, key_positions: int, vocabulary=None):
        """Its stacked scorer, one member per entry of ``ranks``."""
        from .scorers import SoftmaxScorer

        d = self.score_dim or m
        tau = self.temperature * (math.sqrt(d) if self.scaled_scores else 1.0)
        return SoftmaxScorer(m, d, len(ranks), self.heads, key_positions, tau, self.init_scale)


class ModuleModelSpec(BaseSpec):
    """A module written elsewhere (:mod:`.external`) at a rank."""

    built_elsewhere: ClassVar[bool] = True
    restartable: ClassVar[bool] = False
    kind: Literal["module"] = Field("module", description=KIND_TEXT)
    rank: Rank = 16
    module: ModuleSpec = Field(description="kind = module: which module, with which arguments")
    attention_shape: ClassVar[tuple[int, bool, bool]] = (1, False, False)
    target = property(lambda self: self.module.target)


SPECS: dict[str, type[BaseSpec]] = {"kernel": KernelSpec, "softmax": SoftmaxSpec, "module": ModuleModelSpec}


def _of_its_kind(value, handler, info: ValidationInfo):
    """A table validated by the spec of its ``kind``, so its errors name its own keys."""
    if not isinstance(value, dict):
        return handler(value)
    return SPECS[check_kind(value.get("kind", "kernel"))].model_validate(value, context=info.context)


ModelSpec = Annotated[
    KernelSpec | SoftmaxSpec | ModuleModelSpec, Field(discriminator="kind"), WrapValidator(_of_its_kind)
]


def every_field() -> dict[str, FieldInfo]:
    """The model fields of every kind, each once, in one order that holds every kind's (a
    kind's own field placed before the next of its fields already listed)."""
    names: list[str] = []
    infos: dict[str, FieldInfo] = {}
    for cls in SPECS.values():
        own = list(cls.model_fields)
        for i, name in enumerate(own):
            if name in infos:
                continue
            infos[name] = cls.model_fields[name]
            after = [n for n in own[i + 1 :] if n in names]
            names.insert(names.index(after[0]) if after else len(names), name)
    return {name: infos[name] for name in names}


def check_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind not in SPECS:
        raise invalid(f"must be one of {', '.join(KINDS)}, got {kind!r}", path="kind")
    return kind


def model_spec(**fields) -> KernelSpec | SoftmaxSpec | ModuleModelSpec:
    """The spec of ``fields["kind"]`` (default ``"kernel"``) made from ``fields``."""
    kind = fields.get("kind", "kernel")
    if not isinstance(kind, str) or kind not in SPECS:
        raise ConfigError(f"model.kind: must be one of {', '.join(KINDS)}, got {kind!r}")
    return SPECS[kind](**fields)


def model_identity(model: dict) -> dict:
    """:meth:`BaseSpec.identity` of a spec written as a dict (a record's ``config.model``)."""
    from .feature_maps import FEATURE_MAPS

    cls = SPECS.get(model.get("kind"))
    keep = tuple(cls.model_fields) if cls is not None else tuple(model)
    fmap = FEATURE_MAPS.get(model.get("feature_map")) if cls is KernelSpec else None
    if fmap is not None and not fmap.log_space:
        keep = tuple(k for k in keep if k != "temperature")
    return {k: model[k] for k in keep if k in model}


def model_table_schema(ref_template: str = "#/$defs/{model}") -> dict:
    """The JSON schema of a sweep file's ``model`` table: the fields of every kind."""
    properties: dict = {}
    defs: dict = {}
    for cls in SPECS.values():
        schema = cls.model_json_schema(ref_template=ref_template)
        defs.update(schema.pop("$defs", {}))
        for name, prop in schema["properties"].items():
            properties.setdefault(name, prop)
    properties["kind"] = {"default": "kernel", "description": KIND_TEXT, "enum": list(KINDS), "type": "string"}
    ordered = {name: properties[name] for name in every_field()}
    return {"additionalProperties": False, "properties": ordered, "type": "object", "$defs": defs}
