"""IAM in the local stack: each function's AWS calls held against its role in template.yaml."""

from .calls import Unmapped, needs
from .enforcer import FUNCTIONS, RoleEnforcer, acting_function
from .policy import ALLOWED, DENIED, NOT_ALLOWED, Need, Policy
from .roles import Resolver, function_policies, load_template, translate

__all__ = [
    "ALLOWED",
    "DENIED",
    "FUNCTIONS",
    "NOT_ALLOWED",
    "Need",
    "Policy",
    "Resolver",
    "RoleEnforcer",
    "Unmapped",
    "acting_function",
    "function_policies",
    "load_template",
    "needs",
    "translate",
]
